"""The REST facade: Envoy with the gRPC-JSON transcoder in front of the public services.

The transcoder routes REST calls to the RPCs and prints their answers; it does not decode
request input: `oai_errors.lua` moves query strings to a header and each POST route binds its
raw body to `http_body`, and the services decode both against the protos
(`services/common/rest_input.py`) so that errors read like OpenAI's.

`render` builds Envoy's config from `envoy.yaml.tmpl` and the descriptor set `api.pb` (both
generated from protos/); `launcher` runs the pip-installed Envoy binary.
"""

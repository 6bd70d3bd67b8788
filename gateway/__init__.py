"""The REST facade: Envoy with the gRPC-JSON transcoder in front of the public services.

`render` builds Envoy's config from `envoy.yaml.tmpl` and the descriptor set `api.pb` (both
generated from protos/); `launcher` runs the pip-installed Envoy binary.
"""

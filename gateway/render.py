"""Envoy's config, generated from `envoy.yaml.tmpl` and the descriptor set `api.pb`.

The transcoder's service list and the routes come from the descriptor set (itself generated
from protos/), so a new RPC needs no hand edit here: only a new *service* needs a line in
`SERVICE_CLUSTERS`, and `tests/unit/test_gateway_config.py` fails until it has one.
Streaming RPCs (uploads, downloads) get `timeout: 0s` and hold at most 1 MiB of their
body for a retry (an upload passes through Envoy in bounded memory); unary ones a generous
limit.

A dead replica is invisible to clients: each cluster checks its replicas' `grpc.health.v1`
every second and ejects one whose connections fail (outlier detection), and every route
retries on another replica what cannot have reached a server (connect failure, refused
stream, reset before the request was sent); reads (RPCs mapped to HTTP GET) also retry
`unavailable` and resets, since running them twice changes nothing. A frozen replica is found by
HTTP/2 pings (`KEEPALIVE`): its connections are closed and their calls reset. A create is never
retried once it may have reached ingest.

Envoy reaches the services over mutual TLS as identity `envoy`. Its certificate and the CA
bundle come through file-based SDS (`*-sds.yaml` next to the config) with watched
directories, so replacing the files (atomically, as `batchgate certs` does) reloads them.
Health (`grpc.health.v1`) and server reflection (v1, v1alpha) are routed to ingest, which
describes the public API only. Routes match gRPC requests only (`_grpc_only`): anything else on
a method's path is 404 `unknown_url`, as on any path without a route.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2

from batchgate.gateway import panel
from batchgate.gateway.tracing import envoy_tracing
from batchgate.services.common import rest_input, tls
from batchgate.services.common.config import Settings

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "envoy.yaml.tmpl"
DESCRIPTOR_SET = HERE / "api.pb"
LUA_FILTER = HERE / "oai_errors.lua"

# Public gRPC service → the batchgate service (cluster) that implements it.
SERVICE_CLUSTERS = {
    "batchgate.v1.FilesService": "ingest",
    "batchgate.v1.BatchService": "ingest",
    "batchgate.v1.ModelsService": "ingest",
    "batchgate.v1.BatchTemplateService": "ingest",
    "batchgate.v1.ResultsService": "results",
    "batchgate.v1.MessageBatchService": "ingest",
    "batchgate.v1.MessageBatchResultsService": "results",
}
UNARY_TIMEOUT = "300s"  # CreateBatch validates up to 200 MB before it answers
TRANSCODER_BODY_SLACK = 1024 * 1024
STREAM_RETRY_BUFFER_BYTES = 1024 * 1024  # per streaming request (uploads), see _route
# Native gRPC services on Envoy's port besides the public API, all answered by ingest.
FRONT_DOOR = "ingest"
FRONT_DOOR_SERVICES = (
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
)
IDENTITY = "envoy"
# Retries: what never reached a server is safe for every route; reads may also run again.
RETRY_ANY = "connect-failure,refused-stream,reset-before-request"
RETRY_READ = RETRY_ANY + ",unavailable,reset"
RETRIES = 2
HEALTH_CHECK = {
    "timeout": "3s",
    "interval": "1s",
    "interval_jitter": "0.1s",
    # Also 1 s while a cluster has no traffic (Envoy's default is 60 s): a replica that
    # started after Envoy's first check stays out of the balancing until its next one, and
    # if its peer dies meanwhile, every call goes to the dead peer (no panic routing at
    # one healthy host of two).
    "no_traffic_interval": "1s",
    "unhealthy_threshold": 2,
    "healthy_threshold": 1,
}
OUTLIER_DETECTION = {
    # Connect failures and resets (local-origin errors) eject a replica at once, for 5 s and
    # longer each time it happens again; 5xx answers from the service itself do not count.
    "split_external_local_origin_errors": True,
    "consecutive_local_origin_failure": 1,
    "consecutive_5xx": 1000000,
    "consecutive_gateway_failure": 1000000,
    "interval": "1s",
    "base_ejection_time": "5s",
    "max_ejection_percent": 50,
}
KEEPALIVE = {"interval": "3s", "timeout": "3s"}
"""Each connection to a replica is pinged this often and closed when a ping is not answered in
time. A frozen replica (a hung machine, a stopped process) keeps its connections open, and the
calls already sent there waited the whole route timeout; closed, they are reset, and reads retry
on another replica. The servers accept pings this often (`grpc_server.MIN_PING_INTERVAL_MS`)."""
# What a client reads of a 5xx no service wrote (Envoy's own, or a gRPC error without the API's
# envelope, see oai_errors.lua): the services' own words, never Envoy's or a library's.
UNAVAILABLE_MESSAGE = "The service is temporarily unavailable. Please retry."
TIMEOUT_MESSAGE = "The service did not answer in time."
SERVER_ERROR_MESSAGE = "The server had an error while processing your request."
CERT_SECRET = "batchgate_envoy_cert"
CA_SECRET = "batchgate_ca"


@dataclass(frozen=True)
class PublicMethod:
    service: str
    name: str
    streaming: bool
    read: bool
    """Mapped to HTTP GET: safe to run twice."""

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


def public_methods(descriptor_set: Path = DESCRIPTOR_SET) -> list[PublicMethod]:
    """Every RPC of the batchgate.v1 package in the descriptor set."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())
    methods = []
    for file in fds.file:
        if file.package != "batchgate.v1":
            continue
        for service in file.service:
            for method in service.method:
                http = method.options.Extensions[annotations_pb2.http]
                methods.append(
                    PublicMethod(
                        f"{file.package}.{service.name}",
                        method.name,
                        method.client_streaming or method.server_streaming,
                        http.WhichOneof("pattern") == "get",
                    )
                )
    return methods


def max_json_body_bytes(settings: Settings) -> int:
    """Largest JSON body Envoy passes on (413 beyond): inline requests plus room for the rest."""
    return settings.max_inline_bytes + TRANSCODER_BODY_SLACK


def max_message_batch_body_bytes(settings: Settings) -> int:
    """Largest POST /v1/messages/batches body Envoy passes on (ingest checks the exact limit)."""
    return settings.message_batch_max_bytes + TRANSCODER_BODY_SLACK


def sds_paths(config_path: Path) -> dict[str, Path]:
    """The SDS files Envoy's config refers to, next to the config itself."""
    return {
        CERT_SECRET: config_path.with_name(f"{config_path.stem}-cert-sds.yaml"),
        CA_SECRET: config_path.with_name(f"{config_path.stem}-ca-sds.yaml"),
    }


def _sds(name: str, path: Path) -> dict[str, Any]:
    return {
        "name": name,
        "sds_config": {"path_config_source": {"path": str(path)}, "resource_api_version": "V3"},
    }


def sds_resources(settings: Settings) -> dict[str, dict[str, Any]]:
    """The secrets Envoy reads from files: its certificate and key, and the CA bundle. Each
    watches its directory, so files renamed into place are picked up."""
    where = tls.paths(settings, IDENTITY)
    secret = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
    cert = {
        "@type": secret,
        "name": CERT_SECRET,
        "tls_certificate": {
            "certificate_chain": {"filename": str(where.cert.resolve())},
            "private_key": {"filename": str(where.key.resolve())},
            "watched_directory": {"path": str(where.cert.resolve().parent)},
        },
    }
    ca = {
        "@type": secret,
        "name": CA_SECRET,
        "validation_context": {
            "trusted_ca": {"filename": str(where.ca.resolve())},
            "watched_directory": {"path": str(where.ca.resolve().parent)},
        },
    }
    return {CERT_SECRET: {"resources": [cert]}, CA_SECRET: {"resources": [ca]}}


def _upstream_tls(service: str, config_path: Path) -> dict[str, Any]:
    """Mutual TLS to `service`: Envoy's certificate, and the service's identity expected in its."""
    sds = sds_paths(config_path)
    return {
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": service,
            "common_tls_context": {
                "alpn_protocols": ["h2"],
                "tls_certificate_sds_secret_configs": [_sds(CERT_SECRET, sds[CERT_SECRET])],
                "combined_validation_context": {
                    "default_validation_context": {
                        "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": service}}]
                    },
                    "validation_context_sds_secret_config": _sds(CA_SECRET, sds[CA_SECRET]),
                },
            },
        },
    }


def _cluster(name: str, addrs: list[str], settings: Settings, config_path: Path) -> dict[str, Any]:
    endpoints = []
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        endpoints.append(
            {"endpoint": {"address": {"socket_address": {"address": host, "port_value": int(port)}}}}
        )
    cluster: dict[str, Any] = {
        "name": name,
        "type": "STRICT_DNS",
        "connect_timeout": "2s",
        "lb_policy": "ROUND_ROBIN",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {"connection_keepalive": KEEPALIVE}},
            }
        },
        "health_checks": [{**HEALTH_CHECK, "grpc_health_check": {"authority": name}}],
        "outlier_detection": OUTLIER_DETECTION,
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": endpoints}]},
    }
    if not settings.insecure_internal:
        cluster["transport_socket"] = _upstream_tls(name, config_path)
    return cluster


def _grpc_only(match: dict[str, Any]) -> dict[str, Any]:
    """`match` for gRPC requests only (content-type application/grpc…). REST calls are gRPC
    by the time the router matches them (the transcoder rewrote path and content type); a
    plain HTTP request to a method's path reached the service as it came and was reset (a
    503, retried), where it must get the 404 `unknown_url` of any path without a route."""
    return {**match, "grpc": {}}


def _route(match: dict[str, Any], cluster: str, streaming: bool, read: bool) -> dict[str, Any]:
    route: dict[str, Any] = {
        "match": match,
        "route": {
            "cluster": cluster,
            "timeout": "0s" if streaming else UNARY_TIMEOUT,
            "retry_policy": {
                "retry_on": RETRY_READ if read else RETRY_ANY,
                "num_retries": RETRIES,
                "retry_host_predicate": [
                    {
                        "name": "envoy.retry_host_predicates.previous_hosts",
                        "typed_config": {
                            "@type": "type.googleapis.com/"
                            "envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
                        },
                    }
                ],
                "host_selection_retry_max_attempts": 5,
            },
        },
    }
    if streaming:
        # The router keeps a copy of the body sent so far, for a retry, up to the stream's
        # buffer limit, which the transcoder raises to its max_request_body_size (the largest
        # JSON body): a whole 200 MB upload stayed in Envoy. A stream retries only while its
        # first MiB is still in hand (a connect failure before it was sent); beyond, the
        # router forwards under flow control and holds nothing.
        route["request_body_buffer_limit"] = STREAM_RETRY_BUFFER_BYTES
    return route


def render(
    settings: Settings,
    config_path: Path = Path("envoy.yaml"),
    descriptor_path: Path = DESCRIPTOR_SET,
    environ: Mapping[str, str] = os.environ,
) -> dict[str, Any]:
    """The full Envoy config for `settings` as a dict (written to `config_path`, next to which
    its SDS files go); `environ` is read for tracing (`OTEL_*`, as the services read it)."""
    text = string.Template(TEMPLATE.read_text()).substitute(
        host=settings.host,
        port=settings.port,
        admin_host=settings.envoy_admin_host,
        admin_port=settings.envoy_admin_port,
        descriptor=str(descriptor_path.resolve()),
        max_json_body=max_json_body_bytes(settings),
        max_message_batch_body=max_message_batch_body_bytes(settings),
        max_request_body=max(max_json_body_bytes(settings), max_message_batch_body_bytes(settings)),
        max_response_body=settings.grpc_max_message_bytes,
        max_request_headers_kb=rest_input.REQUEST_HEAD_MAX_KB,
        unavailable_message=UNAVAILABLE_MESSAGE,
        timeout_message=TIMEOUT_MESSAGE,
        server_error_message=SERVER_ERROR_MESSAGE,
    )
    config: dict[str, Any] = yaml.safe_load(text)
    methods = public_methods(descriptor_path)
    unmapped = sorted({m.service for m in methods} - set(SERVICE_CLUSTERS))
    if unmapped:
        raise ValueError(f"public services without a cluster in SERVICE_CLUSTERS: {unmapped}")
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["route_config"]["virtual_hosts"][0]["routes"] = [
        _route(_grpc_only({"path": m.path}), SERVICE_CLUSTERS[m.service], m.streaming, m.read)
        for m in methods
    ] + [
        # Health checks and reflection: reads, and Watch / ServerReflectionInfo are streams.
        _route(_grpc_only({"prefix": f"/{service}/"}), FRONT_DOOR, streaming=True, read=True)
        for service in FRONT_DOOR_SERVICES
    ]
    panel.install(hcm)
    filters = {f["name"]: f["typed_config"] for f in hcm["http_filters"]}
    filters["envoy.filters.http.lua"]["default_source_code"]["inline_string"] = (
        f"local MAX_JSON_BODY_BYTES = {max_json_body_bytes(settings)}\n"
        f"local MAX_MESSAGE_BATCH_BYTES = {max_message_batch_body_bytes(settings)}\n"
        f'local UNAVAILABLE_MESSAGE = "{UNAVAILABLE_MESSAGE}"\n'
        f'local TIMEOUT_MESSAGE = "{TIMEOUT_MESSAGE}"\n'
        f'local SERVER_ERROR_MESSAGE = "{SERVER_ERROR_MESSAGE}"\n' + LUA_FILTER.read_text()
    )
    filters["envoy.filters.http.grpc_json_transcoder"]["services"] = sorted({m.service for m in methods})
    clusters = sorted(set(SERVICE_CLUSTERS.values()))
    config["static_resources"]["clusters"] = [
        _cluster(name, settings.addrs(name), settings, config_path.resolve()) for name in clusters
    ]
    if (traced := envoy_tracing(environ)) is not None:  # Envoy's spans join the services' traces
        hcm["tracing"], collector = traced
        config["static_resources"]["clusters"].append(collector)
    return config


def write_config(settings: Settings, path: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """Envoy's config at `path` and, with TLS, its SDS files next to it (checking first that
    Envoy's certificate is there: without it Envoy could not reach any service)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not settings.insecure_internal:
        tls.material(settings, IDENTITY)  # MissingMaterial names the settings
        sds = sds_paths(path)
        for name, resource in sds_resources(settings).items():
            sds[name].write_text(yaml.safe_dump(resource, sort_keys=False))
    path.write_text(yaml.safe_dump(render(settings, path, environ=environ), sort_keys=False))
    return path

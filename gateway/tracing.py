"""Envoy's own spans, in the same traces as the services' (`render` adds them to the config).

When the services export traces (the same `OTEL_*` rules: `otlp_exporters.signal_on`),
Envoy's connection manager gets the OpenTelemetry tracer: each API call gets a server span
`batchgate-envoy` that continues the client's `traceparent` (or starts the trace) and hands
its own context to the service in the `traceparent` header, so ingest's CreateBatch span and,
through it, every item's acceptance link and the batch's finalize sit under the call as the
client made it. Spans go to the traces endpoint over the traces protocol (`grpc` or
`http/protobuf`), through a cluster of its own (`otel_collector`, TLS for `https://`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from batchgate.services.common.otlp_exporters import GRPC, endpoint, protocol, signal_on

CLUSTER = "otel_collector"
SERVICE_NAME = "batchgate-envoy"
METHOD_HEADER = "x-oai-method"  # set by gateway/oai_errors.lua
EXPORT_TIMEOUT = "2s"
HTTP_TRACES_PATH = "/v1/traces"
DEFAULT_PORTS = {"http": 80, "https": 443}


def _traces_url(environ: Mapping[str, str]) -> str:
    """The OTLP/HTTP traces URL: a per-signal endpoint as given, else the shared one plus
    `/v1/traces` (as the SDK exporters do)."""
    own = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if own:
        return own
    return environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/") + HTTP_TRACES_PATH


def _cluster(url: str, grpc: bool) -> dict[str, Any]:
    parts = urlsplit(url)
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
    cluster: dict[str, Any] = {
        "name": CLUSTER,
        "type": "STRICT_DNS",
        "connect_timeout": EXPORT_TIMEOUT,
        "load_assignment": {
            "cluster_name": CLUSTER,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {"socket_address": {"address": parts.hostname, "port_value": port}}
                            }
                        }
                    ]
                }
            ],
        },
    }
    if grpc:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    if parts.scheme == "https":
        cluster["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": parts.hostname,
            },
        }
    return cluster


def envoy_tracing(environ: Mapping[str, str] = os.environ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the connection manager's `tracing`, the collector's cluster), or None when the
    services export no traces."""
    if not signal_on("TRACES", environ):
        return None
    config: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig",
        "service_name": SERVICE_NAME,
    }
    if protocol("TRACES", environ) == GRPC:
        url = endpoint("TRACES", environ)
        config["grpc_service"] = {"envoy_grpc": {"cluster_name": CLUSTER}, "timeout": EXPORT_TIMEOUT}
    else:
        url = _traces_url(environ)
        config["http_service"] = {"http_uri": {"uri": url, "cluster": CLUSTER, "timeout": EXPORT_TIMEOUT}}
    tracing = {
        "provider": {"name": "envoy.tracers.opentelemetry", "typed_config": config},
        # The client's method, not the transcoded call's POST (gateway/oai_errors.lua keeps it).
        "custom_tags": [{"tag": "http.method", "request_header": {"name": METHOD_HEADER}}],
    }
    return tracing, _cluster(url, protocol("TRACES", environ) == GRPC)

"""Envoy's config, generated from `envoy.yaml.tmpl` and the descriptor set `api.pb`.

The transcoder's service list and the routes come from the descriptor set (itself generated
from protos/), so a new RPC needs no hand edit here: only a new *service* needs a line in
`SERVICE_CLUSTERS`, and `tests/unit/test_gateway_config.py` fails until it has one.
Streaming RPCs (uploads, downloads) get `timeout: 0s`; unary ones a generous limit.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import descriptor_pb2

from gateway import panel
from services.common.config import Settings

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "envoy.yaml.tmpl"
DESCRIPTOR_SET = HERE / "api.pb"
LUA_FILTER = HERE / "oai_errors.lua"

# Public gRPC service → the batchgate service (cluster) that implements it.
SERVICE_CLUSTERS = {
    "batchgate.v1.FilesService": "ingest",
    "batchgate.v1.BatchService": "ingest",
    "batchgate.v1.ModelsService": "ingest",
    "batchgate.v1.ResultsService": "results",
}
UNARY_TIMEOUT = "300s"  # CreateBatch validates up to 200 MB before it answers
TRANSCODER_BODY_SLACK = 1024 * 1024


@dataclass(frozen=True)
class PublicMethod:
    service: str
    name: str
    streaming: bool

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
                methods.append(
                    PublicMethod(
                        f"{file.package}.{service.name}",
                        method.name,
                        method.client_streaming or method.server_streaming,
                    )
                )
    return methods


def max_json_body_bytes(settings: Settings) -> int:
    """Largest JSON body Envoy passes on (413 beyond): inline requests plus room for the rest."""
    return settings.max_inline_bytes + TRANSCODER_BODY_SLACK


def _cluster(name: str, addrs: list[str]) -> dict[str, Any]:
    endpoints = []
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        endpoints.append(
            {"endpoint": {"address": {"socket_address": {"address": host, "port_value": int(port)}}}}
        )
    return {
        "name": name,
        "type": "STRICT_DNS",
        "connect_timeout": "2s",
        "lb_policy": "ROUND_ROBIN",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": endpoints}]},
    }


def render(settings: Settings, descriptor_path: Path = DESCRIPTOR_SET) -> dict[str, Any]:
    """The full Envoy config for `settings` as a dict."""
    text = string.Template(TEMPLATE.read_text()).substitute(
        host=settings.host,
        port=settings.port,
        admin_port=settings.envoy_admin_port,
        descriptor=str(descriptor_path.resolve()),
        max_request_body=max_json_body_bytes(settings),
        max_response_body=settings.grpc_max_message_bytes,
    )
    config = yaml.safe_load(text)
    methods = public_methods(descriptor_path)
    unmapped = sorted({m.service for m in methods} - set(SERVICE_CLUSTERS))
    if unmapped:
        raise ValueError(f"public services without a cluster in SERVICE_CLUSTERS: {unmapped}")
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["route_config"]["virtual_hosts"][0]["routes"] = [
        {
            "match": {"path": m.path},
            "route": {
                "cluster": SERVICE_CLUSTERS[m.service],
                "timeout": "0s" if m.streaming else UNARY_TIMEOUT,
            },
        }
        for m in methods
    ]
    panel.install(hcm)
    filters = {f["name"]: f["typed_config"] for f in hcm["http_filters"]}
    filters["envoy.filters.http.lua"]["default_source_code"]["inline_string"] = (
        f"local MAX_JSON_BODY_BYTES = {max_json_body_bytes(settings)}\n" + LUA_FILTER.read_text()
    )
    filters["envoy.filters.http.grpc_json_transcoder"]["services"] = sorted({m.service for m in methods})
    clusters = sorted(set(SERVICE_CLUSTERS.values()))
    config["static_resources"]["clusters"] = [_cluster(name, settings.addrs(name)) for name in clusters]
    return config


def write_config(settings: Settings, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(render(settings), sort_keys=False))
    return path

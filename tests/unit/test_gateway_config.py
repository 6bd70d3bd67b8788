"""Envoy's generated config: valid for Envoy itself, covering every public RPC, health and
reflection, with health checks, outlier detection, safe retries and mutual TLS upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.certs import CertDir
from batchgate.gateway.launcher import validate
from batchgate.gateway.render import (
    FRONT_DOOR_SERVICES,
    KEEPALIVE,
    RETRY_ANY,
    RETRY_READ,
    SERVICE_CLUSTERS,
    STREAM_RETRY_BUFFER_BYTES,
    public_methods,
    render,
    sds_paths,
    write_config,
)
from batchgate.services.common.loading import load_settings
from batchgate.services.common.tls import MissingMaterial


def _routes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    return {
        r["match"].get("path") or r["match"]["prefix"]: r["route"]
        for r in hcm["route_config"]["virtual_hosts"][0]["routes"]
        if "route" in r  # the panel's files are direct responses
    }


@pytest.mark.parametrize("insecure", [False, True], ids=["mutual-tls", "insecure"])
def test_envoy_accepts_the_generated_config(tmp_path: Path, insecure: bool) -> None:
    CertDir.at(tmp_path / "certs").ensure()
    environ = {"BATCHGATE_DATA_DIR": str(tmp_path), "BATCHGATE_INSECURE_INTERNAL": str(insecure)}
    path = write_config(load_settings(environ=environ), tmp_path / "envoy.yaml")
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(p.exists() for p in sds_paths(path).values()) != insecure


def test_envoy_without_its_certificate_is_refused_naming_the_settings(tmp_path: Path) -> None:
    with pytest.raises(MissingMaterial, match="BATCHGATE_TLS_CERT_FILE"):
        write_config(load_settings(environ={"BATCHGATE_DATA_DIR": str(tmp_path)}), tmp_path / "envoy.yaml")


def test_every_public_rpc_has_a_route_with_the_right_timeout_and_retries() -> None:
    routes = _routes(render(load_settings(environ={})))
    methods = public_methods()
    assert {m.path for m in methods} | {f"/{s}/" for s in FRONT_DOOR_SERVICES} == set(routes)
    for method in methods:
        route = routes[method.path]
        assert route["cluster"] == SERVICE_CLUSTERS[method.service]
        assert (route["timeout"] == "0s") == method.streaming
        assert route["retry_policy"]["retry_on"] == (RETRY_READ if method.read else RETRY_ANY)
    by_name = {m.name: m for m in methods}
    assert by_name["CreateFile"].streaming
    assert {n for n, m in by_name.items() if m.read} >= {"GetBatch", "ListBatches", "GetFileContent"}
    # Nothing that writes may run twice once it reached a server.
    for name in ("CreateBatch", "CancelBatch", "CreateFile", "DeleteFile", "UpdateBatchMetadata"):
        assert not by_name[name].read
        assert "reset," not in routes[by_name[name].path]["retry_policy"]["retry_on"] + ","
        assert "unavailable" not in routes[by_name[name].path]["retry_policy"]["retry_on"]
    for service in FRONT_DOOR_SERVICES:
        assert routes[f"/{service}/"]["cluster"] == "ingest"


def test_streams_keep_a_bounded_copy_of_their_body_for_retries() -> None:
    """Without a route limit the router buffers a stream's body for retries up to the
    transcoder's (JSON-sized) limit: an upload would sit in Envoy's memory whole."""
    hcm = render(load_settings(environ={}))["static_resources"]["listeners"][0]["filter_chains"][0]
    routes = {
        r["match"].get("path") or r["match"]["prefix"]: r
        for r in hcm["filters"][0]["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
        if "route" in r
    }
    by_name = {m.name: m for m in public_methods()}
    assert routes[by_name["CreateFile"].path]["request_body_buffer_limit"] == STREAM_RETRY_BUFFER_BYTES
    assert STREAM_RETRY_BUFFER_BYTES <= 1024 * 1024
    # A unary create is one transcoded message: it keeps its retry on a connect failure.
    assert "request_body_buffer_limit" not in routes[by_name["CreateBatch"].path]


def test_clusters_check_health_eject_failing_replicas_and_speak_mutual_tls() -> None:
    clusters = {c["name"]: c for c in render(load_settings(environ={}))["static_resources"]["clusters"]}
    assert set(clusters) == set(SERVICE_CLUSTERS.values())
    for name, cluster in clusters.items():
        (check,) = cluster["health_checks"]
        assert check["grpc_health_check"] == {"authority": name}
        # A replica Envoy found down at start joins within a second, traffic or not.
        assert check["no_traffic_interval"] == check["interval"]
        assert cluster["outlier_detection"]["consecutive_local_origin_failure"] == 1
        # A frozen replica's connections are found by pings, and its calls reset.
        options = cluster["typed_extension_protocol_options"][
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        ]
        assert options["explicit_http_config"]["http2_protocol_options"]["connection_keepalive"] == KEEPALIVE
        tls = cluster["transport_socket"]["typed_config"]
        assert tls["sni"] == name
        validation = tls["common_tls_context"]["combined_validation_context"]["default_validation_context"]
        assert validation["match_typed_subject_alt_names"] == [
            {"san_type": "DNS", "matcher": {"exact": name}}
        ]
    insecure = render(load_settings(environ={"BATCHGATE_INSECURE_INTERNAL": "true"}))
    assert all("transport_socket" not in c for c in insecure["static_resources"]["clusters"])


def test_the_admin_interface_binds_to_loopback_whatever_the_host() -> None:
    config = render(load_settings(environ={"BATCHGATE_HOST": "0.0.0.0"}))
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    assert config["static_resources"]["listeners"][0]["address"]["socket_address"]["address"] == "0.0.0.0"


def test_sds_files_watch_the_certificate_directories(tmp_path: Path) -> None:
    CertDir.at(tmp_path / "certs").ensure()
    path = write_config(load_settings(environ={"BATCHGATE_DATA_DIR": str(tmp_path)}), tmp_path / "envoy.yaml")
    for sds in sds_paths(path).values():
        (secret,) = yaml.safe_load(sds.read_text())["resources"]
        body = secret.get("tls_certificate") or secret["validation_context"]
        assert body["watched_directory"]["path"] == str((tmp_path / "certs").resolve())


def test_several_replicas_become_cluster_endpoints() -> None:
    settings = load_settings(environ={"BATCHGATE_INGEST_ADDRS": "10.0.0.1:1,10.0.0.2:2"})
    clusters = {c["name"]: c for c in render(settings)["static_resources"]["clusters"]}
    endpoints = clusters["ingest"]["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert [e["endpoint"]["address"]["socket_address"]["port_value"] for e in endpoints] == [1, 2]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_envoy_traces_to_the_services_collector_when_they_do(tmp_path: Path, protocol: str) -> None:
    CertDir.at(tmp_path / "certs").ensure()
    settings = load_settings(environ={"BATCHGATE_DATA_DIR": str(tmp_path)})
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
    }
    path = write_config(settings, tmp_path / "envoy.yaml", otel)
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load(path.read_text())
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    tracer = hcm["tracing"]["provider"]["typed_config"]
    assert tracer["service_name"] == "batchgate-envoy"
    if protocol == "grpc":
        assert tracer["grpc_service"]["envoy_grpc"]["cluster_name"] == "otel_collector"
    else:
        assert tracer["http_service"]["http_uri"]["uri"] == "https://collector.example:4318/v1/traces"
    (collector,) = [c for c in config["static_resources"]["clusters"] if c["name"] == "otel_collector"]
    address = collector["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert address["socket_address"] == {"address": "collector.example", "port_value": 4318}
    assert collector["transport_socket"]["name"] == "envoy.transport_sockets.tls"  # https://

    for off in ({}, {**otel, "OTEL_TRACES_EXPORTER": "none"}, {**otel, "OTEL_SDK_DISABLED": "true"}):
        plain = render(settings, tmp_path / "envoy.yaml", environ=off)
        hcm = plain["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        assert "tracing" not in hcm
        assert "otel_collector" not in {c["name"] for c in plain["static_resources"]["clusters"]}


def test_routes_to_the_services_take_grpc_requests_only() -> None:
    """A plain HTTP request to a method's path went to the service as it came (reset: a 503,
    retried); it must find no route, the 404 `unknown_url` of any other path."""
    hcm = render(load_settings(environ={}))["static_resources"]["listeners"][0]["filter_chains"][0]
    routes = hcm["filters"][0]["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
    to_services = [r for r in routes if "route" in r]
    assert len(to_services) == len(public_methods()) + len(FRONT_DOOR_SERVICES)
    for route in to_services:
        assert route["match"].get("grpc") == {}, route["match"]


def test_envoys_own_5xx_answers_never_carry_its_response_code_details() -> None:
    """Every local reply of 500 and above has a mapper with the API's codes (OpenAI's routes)
    or Anthropic's types (Message Batches routes); the default format is left for Envoy's 4xx
    only."""
    hcm = render(load_settings(environ={}))["static_resources"]["listeners"][0]["filter_chains"][0]
    mappers = hcm["filters"][0]["typed_config"]["local_reply_config"]["mappers"]
    codes, anthropic_types = {}, {}
    for mapper in mappers:
        body = mapper.get("body_format_override", {}).get("json_format", {})
        filters = mapper["filter"].get("and_filter", {}).get("filters", [mapper["filter"]])
        status = [f["status_code_filter"]["comparison"] for f in filters if "status_code_filter" in f]
        if not status or status[0]["value"]["default_value"] < 500:
            continue
        key = (status[0]["op"], status[0]["value"]["default_value"])
        if body.get("type") == "error":
            anthropic_types[key] = (mapper.get("status_code"), body["error"]["type"])
        else:
            assert body["error"]["type"] == "server_error"
            codes[key] = body["error"]["code"]
    assert codes == {
        ("EQ", 503): "service_unavailable",
        ("EQ", 504): "service_timeout",
        ("GE", 500): "server_error",
    }
    assert anthropic_types == {
        ("EQ", 503): (529, "overloaded_error"),
        ("EQ", 504): (None, "timeout_error"),
        ("GE", 500): (None, "api_error"),
    }


def test_no_local_reply_names_envoys_response_code_details() -> None:
    """Malformed HTTP was answered `"code": "http1.codec_error"`, headers past Envoy's limit
    `"http1.headers_too_large"`: Envoy's internal names, which README lists nowhere."""
    config = render(load_settings(environ={}))
    assert "RESPONSE_CODE_DETAILS" not in json.dumps(config)
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["local_reply_config"]["body_format"]["json_format"]["error"]["code"] == "invalid_request"

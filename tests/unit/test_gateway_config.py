"""Envoy's generated config: valid for Envoy itself, and covering every public RPC."""

from __future__ import annotations

from pathlib import Path

from gateway.launcher import validate
from gateway.render import SERVICE_CLUSTERS, public_methods, render, write_config
from services.common.config import load_settings


def test_envoy_accepts_the_generated_config(tmp_path: Path) -> None:
    path = write_config(load_settings(environ={}), tmp_path / "envoy.yaml")
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_public_rpc_has_a_route_with_the_right_timeout() -> None:
    config = render(load_settings(environ={}))
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    routes = {
        r["match"]["path"]: r["route"]
        for r in hcm["route_config"]["virtual_hosts"][0]["routes"]
        if "route" in r
    }
    methods = public_methods()
    assert {m.path for m in methods} == set(routes)
    for method in methods:
        assert routes[method.path]["cluster"] == SERVICE_CLUSTERS[method.service]
        assert (routes[method.path]["timeout"] == "0s") == method.streaming
    upload = next(m for m in methods if m.name == "CreateFile")
    assert upload.streaming


def test_several_replicas_become_cluster_endpoints() -> None:
    settings = load_settings(environ={"BATCHGATE_INGEST_ADDRS": "10.0.0.1:1,10.0.0.2:2"})
    clusters = {c["name"]: c for c in render(settings)["static_resources"]["clusters"]}
    endpoints = clusters["ingest"]["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert [e["endpoint"]["address"]["socket_address"]["port_value"] for e in endpoints] == [1, 2]

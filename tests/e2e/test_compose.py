"""compose.yaml: valid for Compose, consistent with batchgate, and runnable (as local processes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests import compose
from tests.otlp_sink import OtlpSink
from tests.support import fresh_database

README = compose.ROOT / "README.md"


def test_compose_file_follows_the_rules() -> None:
    parsed, _ = compose.load()
    assert compose.problems(parsed, compose.read_dockerfile().env) == []
    services = parsed["services"]
    assert {compose.role(s) for s in services.values() if compose.is_batchgate(s)} == set(compose.ROLES)
    assert {"postgres", "otel-collector", "jaeger"} <= set(services)
    assert services["simulator"]["profiles"] == ["simulator"]
    assert "16686:16686" in services["jaeger"]["ports"]


def test_every_compose_variable_has_a_default_and_is_documented() -> None:
    _, variables = compose.load()
    readme = README.read_text()
    assert variables
    for variable in variables:
        assert variable.has_default, (
            f"${{{variable.name}}} needs a default so `docker compose up` works as is"
        )
        assert f"`{variable.name}`" in readme, f"README.md does not document {variable.name}"


def test_the_rules_catch_what_they_are_for() -> None:
    """A broken copy of the file is refused, one problem per mistake."""
    parsed, _ = compose.load()
    services = parsed["services"]
    services["ingest"]["environment"] = {**services["ingest"]["environment"], "BATCHGATE_NO_SUCH": "1"}
    services["executor"]["ports"] = ["50054:50054"]
    services["envoy"]["depends_on"]["ingest"]["condition"] = "service_ready"
    services["results"]["healthcheck"]["test"] = ["CMD", "batchgate", "health", "ingest"]
    services["scheduler"]["command"] = ["serve", "schedulers"]
    services["ingest"]["depends_on"] = {"migrate": {"condition": "service_started"}}
    services["envoy"]["volumes"] = [v for v in services["envoy"]["volumes"] if not v.startswith("certs:")]
    found = compose.problems(parsed, compose.read_dockerfile().env)
    for expected in (
        "BATCHGATE_NO_SUCH is not a setting",
        "executors scale",
        "condition 'service_ready'",
        "healthcheck should be `batchgate health results`",
        "`batchgate serve schedulers` is not a valid command",
        "wait for the migration to complete",
        "ingest: does not wait for the certs job",
        "envoy: BATCHGATE_TLS_DIR '/var/lib/batchgate/certs' is not the volume the certs job writes",
    ):
        assert any(expected in problem for problem in found), (expected, found)


def test_collector_forwards_traces_to_jaeger_and_serves_metrics() -> None:
    parsed, _ = compose.load()
    collector = parsed["services"]["otel-collector"]
    source = next(m.split(":")[0] for m in collector["volumes"])
    config = yaml.safe_load((compose.ROOT / source).read_text())
    grpc_endpoint = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert grpc_endpoint.endswith(":4317")
    endpoint = parsed["x-batchgate"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint == "http://otel-collector:4317"
    pipelines = config["service"]["pipelines"]
    for pipeline in pipelines.values():
        assert set(pipeline["receivers"]) <= set(config["receivers"])
        assert set(pipeline["exporters"]) <= set(config["exporters"])
    jaeger = config["exporters"][pipelines["traces"]["exporters"][0]]["endpoint"]
    assert re.fullmatch(r"jaeger:4317", jaeger)
    assert any("grpc.endpoint=0.0.0.0:4317" in arg for arg in parsed["services"]["jaeger"]["command"])
    assert pipelines["metrics"]["receivers"] == ["otlp"]
    prometheus = config["exporters"][pipelines["metrics"]["exporters"][0]]
    published = prometheus["endpoint"].rsplit(":", 1)[1]
    assert any(str(p).endswith(f":{published}") for p in collector["ports"])
    assert prometheus["resource_to_telemetry_conversion"]["enabled"] is True


@pytest.mark.postgres
def test_compose_stack_runs_a_batch_as_processes(tmp_path: Path) -> None:
    parsed, _ = compose.load()
    with fresh_database("postgres", tmp_path) as url:
        local = compose.LocalCompose(
            parsed,
            compose.read_dockerfile().env,
            url,
            tmp=tmp_path,
            profiles=frozenset({"simulator"}),
            scale={"executor": 2},
        )
        with OtlpSink(local.collector_port()) as sink, local.running():
            started = sorted(child.name for child in local.stack.children)
            assert started == [
                "envoy-0", "executor-0", "executor-1", "ingest-0", "results-0", "scheduler-0", "simulator-0"
            ]  # fmt: skip
            # `docker compose run --rm migrate keys create`
            key = local.run_once("migrate", ["keys", "create", "--name", "compose"]).strip()
            compose.check_sdk_batch(local.api_url(), key, prefix="compose")
            # Traces and metrics go where the file says: every service exports to the collector.
            compose.wait_for_telemetry(sink)

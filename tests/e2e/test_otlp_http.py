"""OTLP over HTTP/protobuf (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`), to a real HTTP
receiver on loopback: item traces across the four services, Envoy's span of the call and
metrics arrive; the per-signal endpoint is used as given and the shared one gets the signal's
path."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchgate.services.common.otlp_exporters import protocol
from tests.otlp_sink import OtlpHttpSink, Span
from tests.support import RunningStack, chat_records, fresh_database, running_stack, upload, wait_for_batch

SERVICES = {"batchgate-ingest", "batchgate-scheduler", "batchgate-executor", "batchgate-results"}
ITEM_SPANS = {"batchgate.item.accept", "batchgate.item.lease", "batchgate.item.run", "batchgate.item.record"}


@pytest.fixture(scope="module")
def http_traced(
    db_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningStack, OtlpHttpSink]]:
    tmp: Path = tmp_path_factory.mktemp(f"otlp-http-{db_kind}")
    with OtlpHttpSink() as sink, fresh_database(db_kind, tmp) as url:
        env = {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.port}",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{sink.port}/collector/traces",
            "BATCHGATE_TRACE_SAMPLE_RATIO": "1.0",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
        }
        with running_stack(tmp, url, **env) as stack:
            yield stack, sink


def test_item_traces_and_metrics_go_out_over_otlp_http(
    http_traced: tuple[RunningStack, OtlpHttpSink],
) -> None:
    stack, sink = http_traced
    client = stack.client()
    records = chat_records(3, prefix=f"otlp-http-{time.time_ns()}")
    client_trace, client_span = secrets.token_hex(16), secrets.token_hex(8)
    batch = client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_headers={"traceparent": f"00-{client_trace}-{client_span}-01"},
    )
    assert wait_for_batch(client, batch.id).request_counts.completed == 3

    def item_spans() -> dict[str, list[Span]]:
        spans = [s for s in sink.spans() if s.attributes.get("batch.id") == batch.id]
        return {
            r["custom_id"]: [s for s in spans if s.attributes.get("item.custom_id") == r["custom_id"]]
            for r in records
        }

    deadline = time.monotonic() + 60
    while not (
        all({s.name for s in spans} >= ITEM_SPANS for spans in item_spans().values()) and sink.points()
    ):
        assert time.monotonic() < deadline, (sink.paths, {k: len(v) for k, v in item_spans().items()})
        time.sleep(0.2)
    for custom_id, spans in item_spans().items():
        assert len({s.trace_id for s in spans}) == 1, custom_id  # one trace per item
        assert {s.service for s in spans} == SERVICES, custom_id
    assert sink.paths["/collector/traces"] >= 1  # the per-signal endpoint, as given
    assert sink.paths["/v1/metrics"] >= 1  # the shared endpoint plus the signal's path
    assert set(sink.paths) <= {"/collector/traces", "/v1/metrics"}

    # Envoy's own span is the call as the client made it: child of the client's span, parent
    # of ingest's CreateBatch, to which every item's acceptance links.
    def call_spans() -> list[Span]:
        return [s for s in sink.spans() if s.trace_id == client_trace]

    while not any(s.service == "batchgate-envoy" for s in call_spans()):
        assert time.monotonic() < deadline, sorted({s.service for s in sink.spans()})
        time.sleep(0.2)
    (envoy,) = [s for s in call_spans() if s.service == "batchgate-envoy"]
    create = next(s for s in call_spans() if s.name == "batchgate.v1.BatchService/CreateBatch")
    assert (envoy.parent_span_id, envoy.kind) == (client_span, "server")
    assert create.parent_span_id == envoy.span_id
    accept = next(s for s in item_spans()[records[0]["custom_id"]] if s.name == "batchgate.item.accept")
    assert accept.links == [(client_trace, create.span_id)]
    assert envoy.attributes["http.method"] == "POST"

    # A read is a GET in Envoy's span too: it said POST, the transcoded call's method.
    read_trace = secrets.token_hex(16)
    client.batches.retrieve(batch.id, extra_headers={"traceparent": f"00-{read_trace}-{client_span}-01"})
    while not any(s.service == "batchgate-envoy" and s.trace_id == read_trace for s in sink.spans()):
        assert time.monotonic() < deadline + 30, "no span of the read"
        time.sleep(0.2)
    (read,) = [s for s in sink.spans() if s.service == "batchgate-envoy" and s.trace_id == read_trace]
    assert read.attributes["http.method"] == "GET"


def test_protocol_follows_the_sdk_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    assert protocol("TRACES") == "grpc"  # batchgate's default, as before
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    assert protocol("TRACES") == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")  # per signal wins
    assert (protocol("TRACES"), protocol("METRICS")) == ("grpc", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="http/json"):
        protocol("TRACES")

"""Failures without an HTTP answer (timeouts, unreachable upstreams, cancel, expiry) are error
file lines with `response: null`, and cancelled/expired batches tell their webhook.

A private stack: a 1 s request time limit, two retries, an upstream nobody listens on, and an
executor that runs two items at a time (so a cancel or an expiry finds queued items).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import httpx
import orjson
import pytest
from grpc_health.v1 import health, health_pb2_grpc
from openai.types import BatchError
from sqlalchemy import update

from batchgate.gateway import launcher as envoy_launcher
from batchgate.services.common import tls
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import batches
from batchgate.services.common.loading import load_settings
from tests.support import (
    RunningStack,
    chat_records,
    free_port,
    fresh_database,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)
from tests.webhook_receiver import WebhookReceiver

CONFIG = """
providers:
  - {{name: simulated, kind: openai, base_url: "http://127.0.0.1:{simulator}/v1", api_keys: [sim]}}
  - {{name: unreachable, kind: openai, base_url: "http://127.0.0.1:{nobody}/v1"}}
models:
  - {{name: gpt-4o-mini, provider: simulated, price: {{input_per_mtok: 0.15, output_per_mtok: 0.6}}}}
  - {{name: offline-model, provider: unreachable}}
retry: {{initial_interval_s: 0.05, max_interval_s: 0.1, max_attempts: 2}}
"""


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"error-shapes-{db_kind}")
    simulator = free_port()
    config = tmp / "batchgate.yaml"
    config.write_text(CONFIG.format(simulator=simulator, nobody=free_port()))
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            BATCHGATE_CONFIG=str(config),
            BATCHGATE_SIMULATOR_PORT=str(simulator),
            BATCHGATE_REQUEST_TIMEOUT_S="1",
            BATCHGATE_EXECUTOR_CONCURRENCY="2",
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.5",
        ) as running,
    ):
        yield running


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def create(client: Any, records: list[dict[str, Any]], **extra: Any) -> Any:
    return client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        **extra,
    )


def error_lines(client: Any, batch: Any) -> list[dict[str, Any]]:
    return read_jsonl(client.files.content(batch.error_file_id).content)


def wait_until_some_finished(client: Any, batch_id: str) -> None:
    deadline = time.monotonic() + 60
    while client.batches.retrieve(batch_id).request_counts.completed < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_timeouts_are_error_objects_next_to_the_successes(stack: RunningStack) -> None:
    client = stack.client()
    ok = chat_records(2, prefix="shape-ok")
    slow = chat_records(1, prefix="shape-slow", x_sim={"delay_ms": 3000})
    batch = wait_for_batch(client, create(client, [ok[0], slow[0], ok[1]]).id)
    assert batch.status == "completed"
    assert [x["custom_id"] for x in read_jsonl(client.files.content(batch.output_file_id).content)] == [
        "shape-ok-0",
        "shape-ok-1",
    ]
    (line,) = error_lines(client, batch)
    assert line["custom_id"] == "shape-slow-0" and line["response"] is None
    error = BatchError.model_validate(line["error"])
    assert error.code == "request_timeout" and error.message


def test_an_unreachable_upstream_gives_connection_errors(stack: RunningStack) -> None:
    client = stack.client()
    batch = wait_for_batch(
        client, create(client, chat_records(2, model="offline-model", prefix="shape-down")).id
    )
    assert batch.status == "completed" and batch.output_file_id is None
    lines = error_lines(client, batch)
    assert [x["custom_id"] for x in lines] == ["shape-down-0", "shape-down-1"]
    for line in lines:
        assert line["response"] is None
        error = BatchError.model_validate(line["error"])
        assert error.code == "connection_error"
        # The system's reason, not the exception's repr with the operator's upstream address.
        assert error.message == "Could not reach the upstream: Connection refused."


def _expire_now(stack: RunningStack, client: Any, batch_id: str) -> None:
    """The completion window passes (a test cannot wait 24 h): move its end into the past."""

    async def run() -> None:
        db = Database(stack.database_url)
        try:
            async with db.write() as conn:
                await conn.execute(
                    update(batches).where(batches.c.id == batch_id).values(expires_at=time.time() - 1)
                )
        finally:
            await db.dispose()

    asyncio.run(run())


def _cancel(_stack: RunningStack, client: Any, batch_id: str) -> None:
    assert client.batches.cancel(batch_id).status in ("cancelling", "cancelled")


ENDINGS = {"cancelled": _cancel, "expired": _expire_now}


@pytest.mark.parametrize("end", sorted(ENDINGS))
def test_cancel_and_expiry_keep_finished_results_and_tell_the_webhook(
    stack: RunningStack, receiver: WebhookReceiver, end: str
) -> None:
    client = stack.client()
    records = chat_records(10, prefix=f"shape-{end}", x_sim={"delay_ms": 700})
    path = receiver.fresh_path(end)
    batch = create(client, records, extra_body={"webhook_url": receiver.url(path)})
    wait_until_some_finished(client, batch.id)
    ENDINGS[end](stack, client, batch.id)
    done = wait_for_batch(client, batch.id)

    assert done.status == end and getattr(done, f"{end}_at") and done.completed_at is None
    finished = read_jsonl(client.files.content(done.output_file_id).content)
    closed = error_lines(client, done)
    assert len(finished) == done.request_counts.completed >= 1  # paid-for results are kept
    assert len(closed) == done.request_counts.failed >= 1
    assert sorted(x["custom_id"] for x in finished + closed) == sorted(r["custom_id"] for r in records)
    for line in closed:
        assert line["response"] is None
        error = BatchError.model_validate(line["error"])
        assert error.code == f"batch_{end}" and error.message

    (call,) = receiver.wait_for(path, 1)
    event = orjson.loads(call.body)  # OpenAI's event: it names the batch, which holds the rest
    assert (event["type"], event["object"], event["data"]) == (f"batch.{end}", "event", {"id": batch.id})
    assert event["created_at"] >= getattr(done, f"{end}_at")


PYTHON_WORDS = "Unexpected <class 'google.protobuf.message.DecodeError'>: Error parsing message"


class _FailingResults(grpc.GenericRpcHandler):
    """A results service whose every call ends as gRPC answers an exception raised outside a
    handler: UNKNOWN, the Python class in the message, no API envelope."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        return grpc.unary_unary_rpc_method_handler(self._fail)

    @staticmethod
    def _fail(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort(grpc.StatusCode.UNKNOWN, PYTHON_WORDS)


@contextlib.contextmanager
def _failing_results(settings: Settings, address: str) -> Iterator[None]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)  # SERVING
    server.add_generic_rpc_handlers((_FailingResults(),))
    material = tls.material(settings, "results")
    if material is None:
        server.add_insecure_port(address)
    else:
        server.add_secure_port(address, tls.server_credentials(material))
    server.start()
    try:
        yield
    finally:
        server.stop(None)


@contextlib.contextmanager
def _gateway(stack: RunningStack, results_addr: str, tmp: Path) -> Iterator[str]:
    """A second Envoy with the stack's own config but for results, which it finds at
    `results_addr`; yields its address."""
    port = free_port()
    env = {
        **stack.env,
        "BATCHGATE_PORT": str(port),
        "BATCHGATE_ENVOY_ADMIN_PORT": str(free_port()),
        "BATCHGATE_RESULTS_ADDRS": results_addr,
    }
    argv = envoy_launcher.command(load_settings(environ=env), tmp / "envoy.yaml", environ={})
    with (tmp / "envoy.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (tmp / "envoy.log").read_text()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert time.monotonic() < deadline, "the second Envoy did not listen"
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _get(address: str, path: str, key: str) -> httpx.Response:
    return httpx.get(f"http://{address}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _server_error(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("server_error", code, None), answer.text
    _readable(answer.text)


def _anthropic_error(answer: httpx.Response, status: int, error_type: str) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["type"] == "error" and body["error"]["type"] == error_type, answer.text
    _readable(answer.text)


def _readable(text: str) -> None:
    """No Python, gRPC or Envoy words: the services' own message for the status."""
    assert not [word for word in ("class", "parsing", "upstream", "grpc", "reset") if word in text.lower()], (
        text
    )


def test_5xx_no_service_wrote_have_the_apis_codes_and_words(
    shared_stack: RunningStack, tmp_path: Path
) -> None:
    """A gRPC error without the API's envelope forwarded its text (a Python exception's, as a
    500 `grpc_status_2`), and Envoy's own 503 (results unreachable) named Envoy's internals
    (`code` `upstream_reset_before_response_started{…}`, type `invalid_request_error`)."""
    usage, message_results = "/v1/usage", "/v1/messages/batches/msgbatch_x/results"
    results_addr = f"127.0.0.1:{free_port()}"
    with _gateway(shared_stack, results_addr, tmp_path) as gateway:
        assert _get(gateway, "/v1/batches", shared_stack.key).status_code == 200  # ingest: the stack's own
        with _failing_results(shared_stack.settings, results_addr):
            _server_error(_get(gateway, usage, shared_stack.key), 500, "server_error")
            _anthropic_error(_get(gateway, message_results, shared_stack.key), 500, "api_error")

        # Nobody listens for results now: Envoy answers itself.
        _server_error(_get(gateway, usage, shared_stack.key), 503, "service_unavailable")
        _anthropic_error(_get(gateway, message_results, shared_stack.key), 529, "overloaded_error")
        with grpc.insecure_channel(gateway) as channel:
            with pytest.raises(grpc.RpcError) as caught:
                channel.unary_unary("/batchgate.v1.ResultsService/GetUsage")(
                    b"", metadata=(("authorization", f"Bearer {shared_stack.key}"),), timeout=30
                )
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "service_unavailable" in (caught.value.details() or ""), caught.value.details()

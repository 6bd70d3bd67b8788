"""Only batchgate's own processes call its internal APIs: mutual TLS from one cluster CA on every
internal port, and each method only for the identities the table in services/common/authz.py
names. Through real processes: the embedded stack (`running_stack`, `batchgate up`) and single
services started without certificates."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2
from openai import OpenAI

from batchgate.certs import CertDir
from batchgate.internal.v1 import (
    executor_pb2,
    executor_pb2_grpc,
    items_pb2,
    recorder_pb2,
    recorder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
    spend_pb2,
    spend_pb2_grpc,
)
from batchgate.services.common import tls
from batchgate.v1 import batches_pb2, batches_pb2_grpc
from tests.execution_support import create_batch, item_rows, private_stack
from tests.support import (
    RunningStack,
    chat_records,
    clean_environ,
    free_port,
    free_port_run,
    internal_channel,
    run_cli,
    session_cert_dir,
    stack_env,
    upload,
    wait_for_batch,
)

HANDSHAKE_TIMEOUT_S = 10


def _port(stack: RunningStack, service: str) -> int:
    return int(getattr(stack.settings, f"{service}_port"))


def _plaintext(stack: RunningStack, service: str) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{_port(stack, service)}")


def _tls(stack: RunningStack, service: str, key: bytes | None, cert: bytes | None) -> grpc.Channel:
    """A client that trusts the cluster CA (so the server's side decides) presenting `cert`."""
    credentials = grpc.ssl_channel_credentials(session_cert_dir().ca_cert.read_bytes(), key, cert)
    options = [tls.server_name_option(service)]
    return grpc.secure_channel(f"127.0.0.1:{_port(stack, service)}", credentials, options=options)


def _intrusions(batch_id: str) -> dict[str, Callable[[grpc.Channel], Any]]:
    """One call per internal port that would change or reveal something if it were accepted."""
    ref = items_pb2.ItemRef(batch_id=batch_id, index=0, attempt=1)
    outcome = recorder_pb2.Outcome(ref=ref, state=recorder_pb2.OUTCOME_STATE_SUCCEEDED, status_code=200)
    return {
        "scheduler": lambda ch: scheduler_pb2_grpc.SchedulerServiceStub(ch).LeaseItems(
            scheduler_pb2.LeaseItemsRequest(executor_id="intruder", max_items=100),
            timeout=HANDSHAKE_TIMEOUT_S,
        ),
        "results": lambda ch: recorder_pb2_grpc.RecorderServiceStub(ch).RecordResults(
            recorder_pb2.RecordResultsRequest(executor_id="intruder", outcomes=[outcome]),
            timeout=HANDSHAKE_TIMEOUT_S,
        ),
        "ingest": lambda ch: batches_pb2_grpc.BatchServiceStub(ch).ListBatches(
            batches_pb2.ListBatchesRequest(), timeout=HANDSHAKE_TIMEOUT_S
        ),
        "executor": lambda ch: executor_pb2_grpc.ExecutorServiceStub(ch).GetExecutorStatus(
            executor_pb2.GetExecutorStatusRequest(), timeout=HANDSHAKE_TIMEOUT_S
        ),
    }


def _refused(call: Callable[[grpc.Channel], Any], channel: grpc.Channel) -> grpc.StatusCode:
    with channel, pytest.raises(grpc.RpcError) as caught:
        call(channel)
    return caught.value.code()  # type: ignore[attr-defined, no-any-return]


def test_callers_without_a_cluster_certificate_are_refused_on_every_internal_port(
    tmp_path: Path,
) -> None:
    foreign = CertDir.at(tmp_path / "foreign")
    foreign.ensure()  # a CA of its own: its certificates name real identities
    with private_stack("sqlite", tmp_path / "stack", BATCHGATE_EXECUTORS="0") as stack:
        batch = create_batch(stack, chat_records(1, prefix="intruded"))
        calls = _intrusions(batch.id)

        def attempts(services: tuple[str, ...]) -> dict[str, dict[str, grpc.StatusCode]]:
            foreign_pair = (foreign.key("executor").read_bytes(), foreign.cert("executor").read_bytes())
            return {
                service: {
                    "plaintext": _refused(calls[service], _plaintext(stack, service)),
                    "no certificate": _refused(calls[service], _tls(stack, service, None, None)),
                    "another CA": _refused(calls[service], _tls(stack, service, *foreign_pair)),
                }
                for service in services
            }

        everywhere = dict.fromkeys(("plaintext", "no certificate", "another CA"), grpc.StatusCode.UNAVAILABLE)
        core = ("ingest", "scheduler", "results")
        assert attempts(core) == dict.fromkeys(core, everywhere)
        # Nothing changed: the item is still queued and was never leased.
        (item,) = item_rows(stack.database_url, batch.id)
        assert (item.state, item.attempt, item.leased_by) == ("queued", 0, None)

        stack.stack.start_executor(0)
        stack.stack.wait_ready()
        assert attempts(("executor",)) == {"executor": everywhere}
        done = wait_for_batch(stack.client(), batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 1)


def _reflection_v1_list(channel: grpc.Channel) -> list[Any]:
    """The services ingest's reflection (v1) lists."""
    info = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    return list(info(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))


def test_an_identity_calls_only_what_it_is_allowed_and_nothing_changes(tmp_path: Path) -> None:
    with private_stack("sqlite", tmp_path, BATCHGATE_EXECUTORS="0") as stack:
        client = stack.client()
        batch = create_batch(stack, chat_records(2, prefix="denied"))
        ref = items_pb2.ItemRef(batch_id=batch.id, index=0, attempt=1)

        def denied(service: str, identity: str, call: Callable[[grpc.Channel], Any]) -> str:
            with (
                internal_channel(stack, service, identity) as channel,
                pytest.raises(grpc.RpcError) as caught,
            ):
                call(channel)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
            return caught.value.details()  # type: ignore[attr-defined, no-any-return]

        scheduler = scheduler_pb2_grpc.SchedulerServiceStub
        recorder = recorder_pb2_grpc.RecorderServiceStub
        cancel = scheduler_pb2.CancelBatchRequest(batch_id=batch.id)
        submit = scheduler_pb2.SubmitBatchRequest(batch_id=batch.id)
        finalize = recorder_pb2.FinalizeBatchRequest(batch_id=batch.id)
        failed = recorder_pb2.Outcome(ref=ref, state=recorder_pb2.OUTCOME_STATE_FAILED)
        spend = spend_pb2.GetSpendRequest()
        refused: list[tuple[str, str, Callable[[grpc.Channel], Any]]] = [
            # An executor may not do what only ingest does (submit, cancel, read spend) ...
            ("scheduler", "executor", lambda ch: scheduler(ch).CancelBatch(cancel, timeout=10)),
            ("scheduler", "executor", lambda ch: scheduler(ch).SubmitBatch(submit, timeout=10)),
            (
                "results",
                "executor",
                lambda ch: spend_pb2_grpc.SpendServiceStub(ch).GetSpend(spend, timeout=10),
            ),
            # ... nor what only the scheduler and results do (finalize) ...
            ("results", "executor", lambda ch: recorder(ch).FinalizeBatch(finalize, timeout=10)),
            # ... nor call the public API directly, nor reflection (v1 is a generic handler of
            # ingest's own, not a generated servicer); Envoy and ingest may call nothing of executors'.
            (
                "ingest",
                "executor",
                lambda ch: batches_pb2_grpc.BatchServiceStub(ch).ListBatches(
                    batches_pb2.ListBatchesRequest(), timeout=10
                ),
            ),
            ("ingest", "executor", _reflection_v1_list),
            (
                "scheduler",
                "envoy",
                lambda ch: scheduler(ch).LeaseItems(
                    scheduler_pb2.LeaseItemsRequest(executor_id="e", max_items=5), timeout=10
                ),
            ),
            (
                "results",
                "ingest",
                lambda ch: recorder(ch).RecordResults(
                    recorder_pb2.RecordResultsRequest(executor_id="ingest", outcomes=[failed]), timeout=10
                ),
            ),
        ]
        messages = [denied(service, identity, call) for service, identity, call in refused]
        assert messages[0] == "executor may not call /batchgate.internal.v1.SchedulerService/CancelBatch"
        assert client.batches.retrieve(batch.id).status == "in_progress"
        assert [(i.state, i.attempt) for i in item_rows(stack.database_url, batch.id)] == [("queued", 0)] * 2

        # The identities that may, can: an executor leases, as executors do.
        with internal_channel(stack, "scheduler", "executor") as channel:
            leased = scheduler(channel).LeaseItems(
                scheduler_pb2.LeaseItemsRequest(executor_id="test", max_items=1, wait_ms=2000), timeout=30
            )
        assert len(leased.items) == 1


class Output(threading.Thread):
    """Reads a process's output as it comes (so a full pipe never blocks it)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.lines: list[str] = []
        self.start()

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if match := re.search(pattern, line):
                    return match
            if self.process.poll() is not None and not self.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r}:\n{''.join(self.lines)[-5000:]}")


def _start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], Output]:
    process = subprocess.Popen(
        [sys.executable, "-m", "batchgate.cli", *argv],
        env=clean_environ(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, Output(process)


def _child_pid(parent: int, command: str) -> int:
    """The pid of `parent`'s child process whose command line holds `command`."""
    found = subprocess.run(["pgrep", "-P", str(parent), "-f", command], capture_output=True, text=True)
    (pid,) = found.stdout.split()
    return int(pid)


def test_batchgate_up_authenticates_internal_calls_with_no_setup_step(tmp_path: Path) -> None:
    env = stack_env(tmp_path, "")  # ports of its own; SQLite in a fresh data directory
    del env["BATCHGATE_TLS_DIR"], env["BATCHGATE_DATABASE_URL"]
    env["BATCHGATE_LOG_FORMAT"] = "json"
    process, output = _start(["up"], env)
    try:
        key = output.wait_for(r"API key  : (bg-\S+)", timeout_s=120).group(1)
        assert output.wait_for("created the cluster CA and certificates", timeout_s=1)
        certs = CertDir.at(tmp_path / "certs")
        assert certs.missing() == [] and certs.ca_key.exists()
        client = OpenAI(base_url=f"http://127.0.0.1:{env['BATCHGATE_PORT']}/v1", api_key=key, max_retries=0)
        batch = client.batches.create(
            input_file_id=upload(client, chat_records(3, prefix="up")).id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        assert wait_for_batch(client, batch.id).request_counts.completed == 3
        scheduler = f"127.0.0.1:{env['BATCHGATE_SCHEDULER_PORT']}"
        with grpc.insecure_channel(scheduler) as channel, pytest.raises(grpc.RpcError) as caught:
            scheduler_pb2_grpc.SchedulerServiceStub(channel).LeaseItems(
                scheduler_pb2.LeaseItemsRequest(executor_id="intruder", max_items=100), timeout=10
            )
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        assert "mutual TLS" in output.wait_for("scheduler serving on .*", timeout_s=1).group(0)

        # A process that dies is started again, and the stack goes on: it had stopped them all.
        executor = _child_pid(process.pid, "serve executor")
        os.kill(executor, signal.SIGKILL)
        output.wait_for("executor-0 exited unexpectedly .*starting it again", timeout_s=30)
        again = client.batches.create(
            input_file_id=upload(client, chat_records(3, prefix="again")).id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        assert wait_for_batch(client, again.id, timeout_s=60).request_counts.completed == 3
        assert process.poll() is None and _child_pid(process.pid, "serve executor") != executor
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)
    # Its own lines are JSON as the services' are: "stopping…" was a bare line in a JSON log.
    (stopping,) = [json.loads(line) for line in output.lines if "stopping" in line]
    assert (stopping["service"], stopping["level"], stopping["message"]) == ("up", "info", "stopping…")


@pytest.mark.parametrize("verb", [["serve", "scheduler"], ["serve", "executor"], ["envoy"]])
def test_a_process_without_tls_material_refuses_to_start_naming_the_settings(
    tmp_path: Path, verb: list[str]
) -> None:
    env = {"BATCHGATE_DATA_DIR": str(tmp_path), "BATCHGATE_SCHEDULER_PORT": str(free_port())}
    env["BATCHGATE_EXECUTOR_PORT"] = str(free_port_run(1))
    done = run_cli(*verb, env=env, timeout_s=60)
    assert done.returncode == 2, done.stderr
    for named in ("BATCHGATE_TLS_CERT_FILE", "BATCHGATE_TLS_CA_FILE", "batchgate certs init"):
        assert named in done.stderr
    assert "BATCHGATE_INSECURE_INTERNAL=true" in done.stderr
    assert str(tmp_path / "certs") in done.stderr


def test_the_insecure_switch_serves_plaintext_and_warns_at_every_start(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "BATCHGATE_DATA_DIR": str(tmp_path),
        "BATCHGATE_INSECURE_INTERNAL": "true",
        "BATCHGATE_EXECUTOR_PORT": str(port),
        "BATCHGATE_SCHEDULER_ADDRS": f"127.0.0.1:{free_port()}",
        "BATCHGATE_RESULTS_ADDRS": f"127.0.0.1:{free_port()}",
        "BATCHGATE_LOG_FORMAT": "text",
    }
    for _attempt in range(2):
        process, output = _start(["serve", "executor"], env)
        try:
            output.wait_for("BATCHGATE_INSECURE_INTERNAL is set: .*Development only", timeout_s=60)
            output.wait_for("executor serving on .*PLAINTEXT", timeout_s=60)
            done = run_cli("health", f"127.0.0.1:{port}", env=env)
            assert done.returncode == 0, done.stderr
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)

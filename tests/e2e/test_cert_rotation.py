"""Certificates rotate without downtime, as the README documents: the CA is replaced in three
steps (`batchgate certs rotate-ca begin`, `certs issue --service all`, `rotate-ca finish`)
while the stack runs, every process follows the files (servers at the next handshake, clients
at their next call, Envoy through its watched directory), and a batch runs before, during and
after; a restarted service is then reached only with the new CA's certificates."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from batchgate import certs as certs_module
from batchgate.certs import CertDir
from batchgate.services.common import tls
from tests.execution_support import create_batch, private_stack, wait_until
from tests.support import RunningStack, chat_records, run_cli, wait_for_batch

SERVICES = ("ingest", "scheduler", "results", "executor")


def _serving(stack: RunningStack, service: str, roots: bytes, key: bytes, cert: bytes) -> bool:
    """One health check on `service`'s port with exactly this trust and this client pair."""

    port = getattr(stack.settings, f"{service}_port")
    credentials = grpc.ssl_channel_credentials(roots, key, cert)
    with grpc.secure_channel(
        f"127.0.0.1:{port}", credentials, options=[tls.server_name_option(service)]
    ) as ch:
        try:
            health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError:
            return False
    return True


def _run_batch(stack: RunningStack, prefix: str) -> None:
    batch = create_batch(stack, chat_records(5, prefix=prefix))
    done = wait_for_batch(stack.client(), batch.id, timeout_s=120)
    assert (done.status, done.request_counts.completed) == ("completed", 5)


def test_the_ca_rotates_without_downtime(tmp_path: Path) -> None:
    certs = CertDir.at(tmp_path / "certs")
    certs.ensure()
    cli_env = {"BATCHGATE_TLS_DIR": str(certs.path)}
    with private_stack("sqlite", tmp_path / "stack", BATCHGATE_TLS_DIR=str(certs.path)) as stack:
        _run_batch(stack, "before")
        old_ca = certs.ca_cert.read_bytes()
        old_pair = (certs.key("operator").read_bytes(), certs.cert("operator").read_bytes())

        # 1. A new CA signs; the bundle trusts both. Servers accept the new CA's certificates.
        assert run_cli("certs", "rotate-ca", "begin", env=cli_env).returncode == 0
        new_cert, new_key = certs_module.issue(*certs.signing_ca(), "operator")
        both = certs.ca_cert.read_bytes()
        for service in SERVICES:
            wait_until(
                f"{service} trusts the new CA",
                lambda s=service: _serving(stack, s, both, new_key, new_cert),
                timeout_s=30,
            )
        _run_batch(stack, "overlap")

        # 2. Every certificate from the new CA: servers present theirs at the next handshake.
        assert run_cli("certs", "issue", "--service", "all", env=cli_env).returncode == 0
        new_ca, _ = certs.signing_ca()
        for service in SERVICES:
            wait_until(
                f"{service} presents a certificate of the new CA",
                lambda s=service: _serving(stack, s, new_ca, new_key, new_cert),
                timeout_s=30,
            )

        # 3. Only the new CA is trusted: the old CA's certificates are refused everywhere.
        assert run_cli("certs", "rotate-ca", "finish", env=cli_env).returncode == 0
        assert certs.ca_cert.read_bytes() == new_ca != old_ca
        for service in SERVICES:
            wait_until(
                f"{service} refuses the old CA",
                lambda s=service: not _serving(stack, s, both, *old_pair),
                timeout_s=30,
            )
        _run_batch(stack, "rotated")

        # New connections everywhere: the executors and Envoy must have followed the files.
        core = next(c for c in stack.stack.children if c.name == "core")
        stack.stack.stop_child(core)
        stack.stack.children.remove(core)
        stack.stack.start_core()
        stack.stack.wait_ready()
        _run_batch(stack, "restarted")
        assert "executor: TLS material reloaded" in (stack.log_dir / "executor-0.log").read_text()

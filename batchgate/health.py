"""`batchgate health`: whether one local service answers, for container health checks.

The container image has no probe binary, so compose runs `batchgate health <target>` inside
each container. It checks what `batchgate up` waits for: a service's gRPC health service
answers SERVING, Envoy's admin `/ready` answers 200, the simulated upstream answers HTTP.
A target is a service name (its port comes from the settings, as the service's own does) or
any `host:port` of a gRPC health service. The probe speaks the cluster's mutual TLS with the
target's own certificate (a container or pod holds its own), or, for a `host:port`, the
`operator` certificate, expecting the name `--service` gives in the server's certificate.
"""

from __future__ import annotations

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from batchgate.services.common import authz, tls
from batchgate.services.common.config import Settings

GRPC_SERVICES = ("ingest", "scheduler", "results", "executor")
HTTP_TARGETS = ("envoy", "simulator")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def grpc_serving(channel: grpc.Channel, timeout_s: float) -> bool:
    """One health check on `channel`: True when the server says SERVING."""
    try:
        answer = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
        )
    except grpc.RpcError:
        return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def _http_ok(url: str, timeout_s: float) -> bool:
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def _local_host(host: str) -> str:
    """Where this machine reaches a service bound to `host`."""
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


def internal_channel(settings: Settings, address: str, service: str, identity: str) -> grpc.Channel:
    """A blocking channel to `service` at `address`, as `identity` (plaintext when internal TLS
    is off)."""
    material = tls.material(settings, identity)
    if material is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(
        address, tls.channel_credentials(material.pem), options=[tls.server_name_option(service)]
    )


def describe(settings: Settings, target: str, index: int = 0) -> str:
    """The address `check` probes for `target` (for messages)."""
    host = _local_host(settings.host)
    if target == "executor":
        return f"{host}:{settings.executor_port + index}"
    if target in GRPC_SERVICES:
        return f"{host}:{getattr(settings, f'{target}_port')}"
    if target == "envoy":
        return f"http://{_local_host(settings.envoy_admin_host)}:{settings.envoy_admin_port}/ready"
    if target == "simulator":
        return f"http://{host}:{settings.simulator_port}/healthz"
    if ":" not in target:
        raise ValueError(f"unknown target {target!r}: a service name or host:port")
    return target


def check(
    settings: Settings, target: str, index: int = 0, timeout_s: float = 3.0, service: str | None = None
) -> bool:
    """Whether `target` is ready. For a `host:port` with TLS, `service` is the identity its
    certificate must name."""
    address = describe(settings, target, index)
    if target in HTTP_TARGETS:
        return _http_ok(address, timeout_s)
    if target in GRPC_SERVICES:
        service, identity = target, target
    elif service is None and not settings.insecure_internal:
        raise ValueError(f"{target}: name the service it runs (--service), as its certificate does")
    else:
        identity = authz.OPERATOR
    with internal_channel(settings, address, service or target, identity) as channel:
        return grpc_serving(channel, timeout_s)

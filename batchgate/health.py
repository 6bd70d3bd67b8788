"""`batchgate health`: whether one local service answers, for container health checks.

The container image has no probe binary, so compose runs `batchgate health <target>` inside
each container. It checks what `batchgate up` waits for: a service's gRPC health service
answers SERVING, Envoy's admin `/ready` answers 200, the simulated upstream answers HTTP.
A target is a service name (its port comes from the settings, as the service's own does) or
any `host:port` of a gRPC health service.
"""

from __future__ import annotations

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.config import Settings

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
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def _http_ok(url: str, timeout_s: float) -> bool:
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def _local_host(settings: Settings) -> str:
    """Where this machine reaches a service bound to `settings.host`."""
    return "127.0.0.1" if settings.host in WILDCARD_HOSTS else settings.host


def describe(settings: Settings, target: str, index: int = 0) -> str:
    """The address `check` probes for `target` (for messages)."""
    host = _local_host(settings)
    if target == "executor":
        return f"{host}:{settings.executor_port + index}"
    if target in GRPC_SERVICES:
        return f"{host}:{getattr(settings, f'{target}_port')}"
    if target == "envoy":
        return f"http://{host}:{settings.envoy_admin_port}/ready"
    if target == "simulator":
        return f"http://{host}:{settings.simulator_port}/healthz"
    if ":" not in target:
        raise ValueError(f"unknown target {target!r}: a service name or host:port")
    return target


def check(settings: Settings, target: str, index: int = 0, timeout_s: float = 3.0) -> bool:
    address = describe(settings, target, index)
    if target in HTTP_TARGETS:
        return _http_ok(address, timeout_s)
    with grpc.insecure_channel(address) as channel:
        return grpc_serving(channel, timeout_s)

"""gRPC channels from one service to another (never through Envoy)."""

from __future__ import annotations

import ipaddress

import grpc

from services.common import telemetry
from services.common.config import Settings
from services.common.grpc_server import channel_options


def _is_ip(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def channel(settings: Settings, service: str, caller: str) -> grpc.aio.Channel:
    """A channel from `caller` to every replica of `service`, balancing calls round-robin (each
    call carries the trace context and, when `caller` traces, gets a client span).

    Several replicas are given either as a list of IP:port (`BATCHGATE_<SERVICE>_ADDRS`) or
    as one DNS name that resolves to all of them (compose's scaled services).
    """
    addrs = settings.addrs(service)
    if len(addrs) > 1:
        if not all(_is_ip(a) for a in addrs):
            raise ValueError(f"{service}: several replicas must be given as IP:port, got {addrs}")
        target = "ipv4:" + ",".join(addrs)
    else:
        target = addrs[0]
    options = [*channel_options(settings), ("grpc.lb_policy_name", "round_robin")]
    return grpc.aio.insecure_channel(
        target, options=options, interceptors=telemetry.client_interceptors(caller)
    )

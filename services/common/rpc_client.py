"""gRPC channels from one service to another (never through Envoy).

A channel balances its calls round-robin over the replicas that are up and say SERVING:
gRPC's client-side health checking (`healthCheckConfig`) watches each replica's
`grpc.health.v1` status, so a replica that is draining (NOT_SERVING while it stops) gets no
new call, and one that died drops out as soon as its connection breaks; a replica that comes
back is reconnected to within `grpc.max_reconnect_backoff_ms`.

With TLS (the default) the channel presents the caller's certificate, expects the service's
identity in the server's certificate whatever address it dials, and follows certificate
changes on disk (`ReloadingChannel`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from collections.abc import Callable
from typing import Any

import grpc

from batchgate.services.common import rpc_tracing, tls
from batchgate.services.common.config import Settings
from batchgate.services.common.grpc_server import channel_options

SERVICE_CONFIG = json.dumps(
    {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}}
)
RETIRE_GRACE_S = 60.0
"""A channel replaced after a certificate change finishes its calls within this long."""


def _is_ip(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def target(settings: Settings, service: str) -> str:
    """Several replicas are given either as a list of IP:port (`BATCHGATE_<SERVICE>_ADDRS`) or
    as one DNS name that resolves to all of them (compose's scaled services)."""
    addrs = settings.addrs(service)
    if len(addrs) > 1:
        if not all(_is_ip(a) for a in addrs):
            raise ValueError(f"{service}: several replicas must be given as IP:port, got {addrs}")
        return "ipv4:" + ",".join(addrs)
    return addrs[0]


def channel(settings: Settings, service: str, caller: str) -> grpc.aio.Channel:
    """A channel from `caller` to every healthy replica of `service` (each call carries the
    trace context and, when `caller` traces, gets a client span)."""
    address = target(settings, service)
    options = [*channel_options(settings), ("grpc.service_config", SERVICE_CONFIG)]
    interceptors = rpc_tracing.client_interceptors(caller)
    material = tls.material(settings, caller)
    if material is None:
        return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
    options.append(tls.server_name_option(service))

    def make(pem: tls.Pem) -> grpc.aio.Channel:
        return grpc.aio.secure_channel(
            address, tls.channel_credentials(pem), options=options, interceptors=interceptors
        )

    return ReloadingChannel(material, make)


class _MultiCallable:
    """A stub's method: each call goes to the owner's current channel."""

    def __init__(self, owner: ReloadingChannel, kind: str, method: str, kwargs: dict[str, Any]) -> None:
        self._owner, self._kind, self._method, self._kwargs = owner, kind, method, kwargs
        self._generation = -1
        self._callable: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        generation, current = self._owner.current()
        if generation != self._generation:
            self._callable = getattr(current, self._kind)(self._method, **self._kwargs)
            self._generation = generation
        return self._callable(*args, **kwargs)


class ReloadingChannel:
    """A channel whose TLS material follows the files: once they change, new calls go to a
    channel built with the new material and the old one is closed after its calls finished.
    Stubs take it like any `grpc.aio.Channel`."""

    def __init__(self, material: tls.Material, make: Callable[[tls.Pem], grpc.aio.Channel]) -> None:
        self._material = material
        self._make = make
        self._channel = make(material.pem)
        self._generation = 0
        self._next_check = time.monotonic() + tls.RELOAD_CHECK_S
        self._retiring: dict[asyncio.Task[None], grpc.aio.Channel] = {}

    def current(self) -> tuple[int, grpc.aio.Channel]:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + tls.RELOAD_CHECK_S
            fresh = self._material.changed()
            if fresh is not None:
                old, self._channel = self._channel, self._make(fresh)
                self._generation += 1
                task = asyncio.get_running_loop().create_task(old.close(grace=RETIRE_GRACE_S))
                self._retiring[task] = old
                task.add_done_callback(lambda done: self._retiring.pop(done, None))
        return self._generation, self._channel

    def unary_unary(self, method: str, **kwargs: Any) -> Any:
        return _MultiCallable(self, "unary_unary", method, kwargs)

    def unary_stream(self, method: str, **kwargs: Any) -> Any:
        return _MultiCallable(self, "unary_stream", method, kwargs)

    def stream_unary(self, method: str, **kwargs: Any) -> Any:
        return _MultiCallable(self, "stream_unary", method, kwargs)

    def stream_stream(self, method: str, **kwargs: Any) -> Any:
        return _MultiCallable(self, "stream_stream", method, kwargs)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self.current()[1].get_state(try_to_connect)

    async def channel_ready(self) -> None:
        await self.current()[1].channel_ready()

    async def close(self, grace: float | None = None) -> None:
        retiring = list(self._retiring.items())
        for task, _old in retiring:
            task.cancel()
        await asyncio.gather(self._channel.close(grace), *(old.close(grace) for _task, old in retiring))

    async def __aenter__(self) -> ReloadingChannel:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

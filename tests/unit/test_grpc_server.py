"""Hosting a service: a port another server holds is an error, never a shared listener; a
server's receive windows stay fixed; a frozen server fails its callers' calls in seconds; the
stop signals are handed back when serving ends; a request that does not decode is
INVALID_ARGUMENT in the API's envelope."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from batchgate.services.common.grpc_server import (
    KEEPALIVE_MS,
    Registry,
    ServiceHost,
    channel_options,
    run_hosts,
    server_options,
)
from batchgate.services.common.loading import load_settings
from tests.support import free_port

INSECURE = load_settings(environ={"BATCHGATE_INSECURE_INTERNAL": "true"})


async def test_a_taken_port_is_refused_instead_of_shared() -> None:
    holder = grpc.aio.server()  # gRPC's defaults, SO_REUSEPORT included
    port = holder.add_insecure_port("127.0.0.1:0")
    await holder.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(5, stop.set)  # without the check it would serve
    try:
        host = ServiceHost(name="probe", port=port, register=lambda server: [])
        with pytest.raises(RuntimeError, match="cannot listen"):
            settings = load_settings(environ={"BATCHGATE_INSECURE_INTERNAL": "true"})
            await run_hosts([host], settings, None, stop=stop, grace_s=0)
    finally:
        await holder.stop(None)


async def test_serving_hands_the_stop_signals_back() -> None:
    """A process that forks after serving (here: a test on a shared event loop) must not
    leave its children deaf to SIGTERM, which asyncio's handler would swallow."""
    before = [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)]
    stop = asyncio.Event()
    stop.set()
    settings = load_settings(environ={"BATCHGATE_INSECURE_INTERNAL": "true"})
    await run_hosts([], settings, None, stop=stop, grace_s=0)
    assert [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)] == before
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    child.start()
    try:
        child.terminate()
        child.join(10)
        assert child.exitcode == -signal.SIGTERM
    finally:
        if child.exitcode is None:
            child.kill()
            child.join()


def test_servers_keep_a_fixed_receive_window() -> None:
    """BDP probing grew a loopback upload's window until Envoy had pushed the whole file
    into ingest's transport buffers; servers keep gRPC's fixed per-stream window."""
    options = dict(server_options(INSECURE))
    assert options["grpc.http2.bdp_probe"] == 0
    assert options["grpc.so_reuseport"] == 0


def _serve_health(port: int) -> None:
    async def serve() -> None:
        server = grpc.aio.server(options=server_options(INSECURE))
        health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    asyncio.run(serve())


async def test_a_call_to_a_frozen_server_fails_within_two_pings() -> None:
    """A stopped process (or a hung machine) keeps its connection open and never answers: the
    channel's pings find it, and the call fails long before its deadline. gRPC's defaults (and
    keepalive_timeout alone: the ping's wait is `ping_timeout_ms`, a minute) let it wait."""
    port = free_port()
    child = multiprocessing.get_context("spawn").Process(target=_serve_health, args=(port,), daemon=True)
    child.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options(INSECURE))
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=30, wait_for_ready=True)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - started < 3 * KEEPALIVE_MS / 1000
    finally:
        await channel.close()
        if child.pid is not None:
            os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.join(10)


async def _echo(requests: AsyncIterator[health_pb2.HealthCheckRequest], context: Any) -> AsyncIterator[Any]:
    async for _request in requests:
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


def _register_echo(registry: Registry) -> list[str]:
    registry.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "probe.Echo",
                {
                    "Echo": grpc.stream_stream_rpc_method_handler(
                        _echo,
                        request_deserializer=health_pb2.HealthCheckRequest.FromString,
                        response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
                    )
                },
            ),
        )
    )
    return []


async def test_a_request_that_does_not_decode_is_invalid_argument_without_python_words() -> None:
    """gRPC's aio server answered a deserializer's DecodeError with UNKNOWN, "Unexpected
    <class '…DecodeError'>": the wrapped deserializer makes it the API's 400, unary or streamed."""
    port = free_port()
    settings = load_settings(environ={"BATCHGATE_INSECURE_INTERNAL": "true", "BATCHGATE_HOST": "127.0.0.1"})
    stop = asyncio.Event()
    host = ServiceHost(name="probe", port=port, register=_register_echo)
    serving = asyncio.create_task(run_hosts([host], settings, None, stop=stop, grace_s=0))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await asyncio.wait_for(channel.channel_ready(), 10)
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            stream = channel.stream_stream("/probe.Echo/Echo")
            cases = [
                (check(b"\x0a\x02\xff\xfe", timeout=5), "service"),  # a string field, not UTF-8
                (check(b"\xff\xff\xff", timeout=5), None),  # not a message at all
                (stream(iter([b"\x0a\x01x", b"\x0a\x01\xff"]), timeout=5), "service"),
            ]
            for call, param in cases:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    if isinstance(call, grpc.aio.StreamStreamCall):
                        [_ async for _ in call]
                    else:
                        await call
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
                details = caught.value.details() or ""
                assert "class" not in details and "DecodeError" not in details
                trailers = dict(caught.value.trailing_metadata() or ())
                error = json.loads(trailers["x-oai-error"])["error"]
                assert (trailers["x-oai-status"], error["code"], error["param"]) == (
                    "400",
                    "invalid_value",
                    param,
                )
            answer = await check(health_pb2.HealthCheckRequest().SerializeToString(), timeout=5)
            assert (
                health_pb2.HealthCheckResponse.FromString(answer).status
                == health_pb2.HealthCheckResponse.SERVING
            )
    finally:
        stop.set()
        await asyncio.wait_for(serving, 10)

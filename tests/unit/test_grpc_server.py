"""Hosting a service: a port another server holds is an error, never a shared listener; a
server's receive windows stay fixed; the stop signals are handed back when serving ends."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import time

import grpc
import pytest

from batchgate.services.common.grpc_server import ServiceHost, run_hosts, server_options
from batchgate.services.common.loading import load_settings


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
    options = dict(server_options(load_settings(environ={"BATCHGATE_INSECURE_INTERNAL": "true"})))
    assert options["grpc.http2.bdp_probe"] == 0
    assert options["grpc.so_reuseport"] == 0

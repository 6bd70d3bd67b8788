"""An aiohttp application served on loopback from its own thread and event loop, for the fake
upstreams and providers the tests run against (real HTTP servers, no mocks)."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

from tests.support import free_port


class LoopbackServer:
    def __init__(self, app: web.Application, what: str) -> None:
        self.port = free_port()
        self._app = app
        self._what = what
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    async def _serve(self, ready: threading.Event) -> None:
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port, backlog=1024).start()
        self._stop = asyncio.Event()
        ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def start(self) -> None:
        ready = threading.Event()
        serve = self._serve(ready)
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(serve,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self._what} did not start")

    def stop(self) -> None:
        assert self._thread is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

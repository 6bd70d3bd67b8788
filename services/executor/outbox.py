"""The executor's finished outcomes on their way to results.

A group is sent as soon as the previous one is acknowledged (at most `result_batch_max`
outcomes and one gRPC message's worth, `message_budget`, after waiting `result_flush_ms` for
company), so outcomes wait for results about one round trip and a `kill -9` repeats little
beyond what was running upstream. A failed send is retried with a capped backoff; a repeat is
harmless (results deduplicates by fencing token). An outcome leaves the outbox only once
results acknowledged it. While results takes none (a send failed, and none succeeded since),
`held_back` hears so and no new upstream call starts: the executor went on calling and kept
a thousand answers in memory, which a `kill -9` or a shutdown then lost and ran again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc

from batchgate.internal.v1 import recorder_pb2
from batchgate.services.common.config import Settings
from batchgate.services.common.message_budget import fitting, message_budget
from batchgate.services.executor.outcomes import outcome_bytes

log = logging.getLogger(__name__)

RPC_RETRY_S = 0.25
RPC_RETRY_MAX_S = 2.0
FLUSH_TRIES = 8  # on shutdown, unsent outcomes are retried this often (about 2 s at most)

Send = Callable[[list[recorder_pb2.Outcome]], Awaitable[recorder_pb2.RecordResultsResponse]]
Acknowledged = Callable[[list[recorder_pb2.Outcome], recorder_pb2.RecordResultsResponse], None]
HeldBack = Callable[[bool], None]


@dataclass
class Retry:
    """Capped exponential waits between tries of one RPC, logging the first failure of a run."""

    what: str
    failures: int = 0

    @property
    def wait_s(self) -> float:
        return float(min(RPC_RETRY_S * 2 ** max(self.failures - 1, 0), RPC_RETRY_MAX_S))

    def failed(self, exc: grpc.aio.AioRpcError) -> float:
        self.failures += 1
        if self.failures == 1:
            log.warning("%s failed (%s); retrying", self.what, exc.code())
        return self.wait_s

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s works again after %d failed tries", self.what, self.failures)
        self.failures = 0


class Outbox:
    """Outcomes not yet acknowledged by results, sent one group at a time by `send`;
    `acknowledged` hears of every group results answered, `held_back` whether results stopped
    (True) or started again (False) taking them."""

    def __init__(
        self, settings: Settings, send: Send, acknowledged: Acknowledged, held_back: HeldBack
    ) -> None:
        self._settings = settings
        self._send = send
        self._acknowledged = acknowledged
        self._held_back = held_back
        self.pending: list[recorder_pb2.Outcome] = []
        self.retry = Retry("RecordResults")
        self._ready = asyncio.Event()
        self._sending = asyncio.Lock()

    def add(self, outcome: recorder_pb2.Outcome) -> None:
        self.pending.append(outcome)
        self._ready.set()

    async def run(self) -> None:
        """Send a group as soon as there is one and the previous one was acknowledged; outcomes
        finishing during a send go out together next."""
        while True:
            if not self.pending:
                self._ready.clear()
                await self._ready.wait()
            if self._settings.result_flush_ms and len(self.pending) < self._settings.result_batch_max:
                await asyncio.sleep(self._settings.result_flush_ms / 1000)
            if not await self._send_group():
                await asyncio.sleep(self.retry.wait_s)

    async def flush(self) -> bool:
        """Send every waiting outcome; returns whether the outbox is empty (on failure the rest
        stays for later)."""
        while self.pending:
            if not await self._send_group():
                return False
        return True

    async def drain(self, deadline: float) -> None:
        """On shutdown: send what is left, trying until `deadline` (monotonic). What results did
        not take by then is lost with this process, and its items run again: said in the log,
        where it went unsaid."""
        for _ in range(FLUSH_TRIES):
            if await self.flush() or time.monotonic() > deadline:
                break
            await asyncio.sleep(self.retry.wait_s)
        if self.pending:
            log.error(
                "results took no answer for %d finished items before the shutdown deadline: "
                "they will run again",
                len(self.pending),
            )

    def _oldest_group(self) -> list[recorder_pb2.Outcome]:
        """The oldest outcomes, at most `result_batch_max` of them and a message's worth."""
        oldest = self.pending[: self._settings.result_batch_max]
        return oldest[: fitting(oldest, outcome_bytes, message_budget(self._settings))]

    async def _send_group(self) -> bool:
        """Send the oldest group of outcomes. One send at a time: a group leaves the outbox
        (and frees its slots) only once results acknowledged it."""
        async with self._sending:
            group = self._oldest_group()
            if not group:
                return True
            try:
                answer = await self._send(group)
            except grpc.aio.AioRpcError as exc:
                if not self.retry.failures:
                    self._held_back(True)
                self.retry.failed(exc)
                return False
            if self.retry.failures:
                self._held_back(False)
            self.retry.succeeded()
            sent = {id(o) for o in group}  # the outbox may have changed during the call
            self.pending = [o for o in self.pending if id(o) not in sent]
            self._acknowledged(group, answer)
            return True

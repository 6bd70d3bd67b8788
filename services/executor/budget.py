"""Drawing per-key rate budgets from the scheduler, which holds them for the whole deployment.

A budgeted key whose allowance runs short asks here (`KeyPool` calls `ask`); asks of every key
that wait at the same moment go in one `GrantBudget` call, for what the waiting call needs plus
about `AHEAD_S` of the key's rate, so a busy key asks about once per `AHEAD_S`. What comes back
is added to the key's allowance, or, when the budget is spent, the key is told when to ask
again; either way the dispatcher is woken to try again. A scheduler that cannot be reached is
asked again after a short backoff (the key's calls wait meanwhile: a budget is never guessed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from batchgate.internal.v1 import scheduler_pb2, scheduler_pb2_grpc
from batchgate.services.executor.limits import Key

log = logging.getLogger(__name__)

AHEAD_S = 1.0  # a grant covers the waiting call plus about this much of the key's rate
RETRY_S = 0.5  # wait before asking again after a failed GrantBudget call


@dataclass
class BudgetClient:
    scheduler: scheduler_pb2_grpc.SchedulerServiceStub
    executor_id: str
    wake: Callable[[], None]
    """Called after each answer (the dispatcher tries its waiting calls again)."""
    clock: Callable[[], float] = time.monotonic
    _asks: dict[str, tuple[Key, float, float]] = field(default_factory=dict)
    _sending: asyncio.Task[None] | None = None

    def ask(self, key: Key, requests: float, tokens: float) -> None:
        key.asking = True
        self._asks[key.key_id] = (key, requests, tokens)
        if self._sending is None or self._sending.done():
            self._sending = asyncio.create_task(self._send(), name="grant-budget")

    async def _send(self) -> None:
        while self._asks:
            asks, self._asks = self._asks, {}
            keys = [key for key, _r, _t in asks.values()]
            request = scheduler_pb2.GrantBudgetRequest(
                executor_id=self.executor_id,
                asks=[
                    scheduler_pb2.BudgetAsk(
                        key_id=key.key_id,
                        requests_per_minute=key.requests_per_minute,
                        tokens_per_minute=key.tokens_per_minute,
                        requests_needed=requests,
                        requests_wanted=max(requests, key.requests_per_minute / 60 * AHEAD_S)
                        if key.requests_per_minute > 0
                        else 0,
                        tokens_needed=tokens,
                        tokens_wanted=max(tokens, key.tokens_per_minute / 60 * AHEAD_S)
                        if key.tokens_per_minute > 0
                        else 0,
                    )
                    for key, requests, tokens in asks.values()
                ],
            )
            try:
                answer = await self.scheduler.GrantBudget(request, timeout=10)
            except grpc.aio.AioRpcError as exc:
                log.warning("GrantBudget failed (%s); asking again in %.1fs", exc.code(), RETRY_S)
                for key in keys:
                    key.asking = False
                    key.ask_after = self.clock() + RETRY_S
            else:
                for key, grant in zip(keys, answer.grants, strict=True):
                    key.asking = False
                    key.requests += grant.requests
                    key.tokens += grant.tokens
                    key.ask_after = self.clock() + grant.retry_after_ms / 1000
            self.wake()

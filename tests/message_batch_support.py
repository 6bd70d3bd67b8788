"""Helpers of the Message Batches tests: the anthropic SDK against a running stack.

`NATIVE` runs on the simulator's Anthropic Messages API (the params go as they are),
`TRANSLATED` on its OpenAI-compatible API (translated both ways).
"""

from __future__ import annotations

import time
from typing import Any

import anthropic

from tests.support import RunningStack

NATIVE = "claude-haiku-4-5"
TRANSLATED = "gpt-4o-mini"
TERMINAL_WAIT_S = 120.0


def sdk(stack: RunningStack, project: str = "default", **kwargs: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=stack.base_url.removesuffix("/v1"), api_key=stack.keys[project], max_retries=0, **kwargs
    )


def params(model: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **extra}


def wait_ended(client: anthropic.Anthropic, batch_id: str) -> Any:
    deadline = time.monotonic() + TERMINAL_WAIT_S
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)

"""`redacted_body`: what the merged results echo of a request body that carries credentials."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.services.results.result_formats import REDACTED, redacted_body


def test_tool_and_workflow_authorizations_are_redacted_and_the_rest_kept() -> None:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "batchgate \u2028"}],
        "batchgate": {
            "tool_config": {"type": "http", "url": "https://tools.example/", "authorization": "Bearer t"},
            "workflow": {"url": "https://cb.example/", "authorization": "Bearer w", "context": {"k": 1}},
        },
    }
    echoed = orjson.loads(redacted_body(orjson.dumps(body)))
    assert echoed["batchgate"]["tool_config"]["authorization"] == REDACTED
    assert echoed["batchgate"]["workflow"]["authorization"] == REDACTED
    for section in ("tool_config", "workflow"):
        echoed["batchgate"][section]["authorization"] = body["batchgate"][section]["authorization"]
    assert echoed == body


def test_bodies_without_a_credential_come_back_as_they_are() -> None:
    """The hot path: most bodies are not parsed at all, and none is rewritten needlessly."""
    for body in (
        {"model": "m", "messages": []},
        {"model": "m", "messages": [{"role": "user", "content": "batchgate"}], "batchgate": None},
        {"model": "m", "batchgate": {"tool_config": {"url": "https://tools.example/"}}},
        {"model": "m", "batchgate": {"workflow": "not an object"}},
    ):
        stored = orjson.dumps(body)
        assert redacted_body(stored) is stored

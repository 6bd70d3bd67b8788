"""Helpers of the recurring-batch tests: the injected template clock, and the template API
as the openai SDK reaches it (`client.get`/`post`/`delete` on `/batch_templates`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.support import eventually

ENDPOINT = "/v1/chat/completions"
QUIET_S = 2.5  # more than two scheduler ticks: time for a wrong second run to appear


class Clock:
    """The stack's template clock: unix seconds in a file that the services read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(time.time())

    def now(self) -> float:
        return float(self.path.read_text())

    def set(self, at: float) -> None:
        partial = self.path.with_suffix(".part")
        partial.write_text(repr(float(at)))
        partial.replace(self.path)


def schedule(
    client: Any, file_id: str, expression: str, zone: str | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"cron": expression, **extra}
    if zone:
        body["cron_timezone"] = zone
    answer = client.batches.create(
        input_file_id=file_id, endpoint=ENDPOINT, completion_window="24h", extra_body=body
    )
    return dict(answer.to_dict())


def template(client: Any, template_id: str) -> dict[str, Any]:
    return dict(client.get(f"/batch_templates/{template_id}", cast_to=object))


def act(client: Any, template_id: str, action: str = "", **body: Any) -> dict[str, Any]:
    path = f"/batch_templates/{template_id}" + (f"/{action}" if action else "")
    return dict(client.post(path, body=body, cast_to=object))


def runs(client: Any, template_id: str) -> list[Any]:
    return list(client.batches.list(extra_query={"template_id": template_id}).data)


def wait_for_runs(client: Any, template_id: str, count: int) -> list[Any]:
    found = eventually(lambda: (r := runs(client, template_id)) and len(r) >= count and r)
    assert len(found) == count, [r.id for r in found]
    return found

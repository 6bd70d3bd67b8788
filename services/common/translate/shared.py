"""What every translator shares: the refusal it raises, and reading tool-call arguments."""

from __future__ import annotations

from typing import Any

import orjson

JsonObject = dict[str, Any]


class Untranslatable(ValueError):
    """The input uses something the other shape cannot express.

    `param` is the path of the offending field inside the translated object (`top_k`,
    `messages[2].content[0].source`), `message` a sentence that names it and says what to do.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def refuse(param: str, why: str) -> Untranslatable:
    """`param` cannot be translated, because `why` (a clause: "must be a list")."""
    return Untranslatable(f"'{param}': {why}.", param)


def json_object(raw: Any, *, param: str, what: str) -> JsonObject:
    """`raw` (a JSON object, or its JSON text) as a dict; anything else is `Untranslatable`.

    Tool-call arguments travel as JSON text in OpenAI's shape and as an object in Anthropic's.
    """
    if isinstance(raw, dict):
        return raw
    try:
        parsed = orjson.loads(raw or "{}")
    except (orjson.JSONDecodeError, TypeError):
        parsed = None
    if not isinstance(parsed, dict):
        raise Untranslatable(f"{what} must be a JSON object.", param)
    return parsed


def json_text(value: Any) -> str:
    """`value` as compact JSON text (how OpenAI carries tool-call arguments)."""
    return orjson.dumps(value).decode()

"""Anthropic tool definitions and `tool_choice` as OpenAI chat function tools (for
`anthropic_to_chat`): client tools `{name, description, input_schema, strict}` map to function
tools; server tools (web search, code execution, …) and unknown tool fields are refused."""

from __future__ import annotations

from typing import Any

from batchgate.services.common.translate.shared import JsonObject, refuse

TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


TOOL_FIELDS = frozenset({"name", "description", "input_schema", "type", "cache_control", "strict"})
TOOL_NO_OP_VALUES: dict[str, tuple[Any, ...]] = {
    "eager_input_streaming": (None, False, True),  # a streaming hint: a batch does not stream
    "defer_loading": (False,),
    "allowed_callers": (["direct"],),
}


def _tool(tool: Any, param: str) -> JsonObject:
    if not isinstance(tool, dict):
        raise refuse(param, "must be an object")
    if tool.get("type") not in (None, "custom"):
        raise refuse(
            f"{param}.type", f"{tool['type']!r} is a server tool; only client tools have an OpenAI equivalent"
        )
    for key, value in tool.items():
        if key not in TOOL_FIELDS and value not in TOOL_NO_OP_VALUES.get(key, ()):
            raise refuse(f"{param}.{key}", "has no equivalent on an OpenAI-compatible upstream")
    name, schema = tool.get("name"), tool.get("input_schema")
    if not isinstance(name, str) or not name or not isinstance(schema, dict):
        raise refuse(param, "a tool needs a 'name' and an object 'input_schema'")
    function: JsonObject = {"name": name, "parameters": schema}
    if tool.get("description"):
        function["description"] = tool["description"]
    if tool.get("strict") is not None:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def chat_tools(value: Any, out: JsonObject) -> None:
    """`tools` (client tools only) → OpenAI function tools."""
    if not isinstance(value, list):
        raise refuse("tools", "must be a list")
    if value:
        out["tools"] = [_tool(tool, f"tools[{number}]") for number, tool in enumerate(value)]


def chat_tool_choice(value: Any, out: JsonObject) -> None:
    """`tool_choice` → OpenAI's, and `disable_parallel_tool_use` → `parallel_tool_calls: false`."""
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(value, dict) or set(value) - {"type", "name", "disable_parallel_tool_use"}:
        raise refuse("tool_choice", "must be {type, name?, disable_parallel_tool_use?}")
    if kind == "tool" and isinstance(value.get("name"), str):
        out["tool_choice"] = {"type": "function", "function": {"name": value["name"]}}
    elif isinstance(kind, str) and kind in TOOL_CHOICES:
        out["tool_choice"] = TOOL_CHOICES[kind]
    else:
        raise refuse("tool_choice.type", "must be auto, any, none, or tool with a 'name'")
    if value.get("disable_parallel_tool_use") is True and kind != "none":
        out["parallel_tool_calls"] = False

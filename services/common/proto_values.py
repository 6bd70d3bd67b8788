"""Building `google.protobuf.Value` fields, the way nullable fields print as JSON null.

The transcoder omits unset optional scalars and messages; a Value holding `null_value` is the
only way to print `null`, which typed OpenAI clients expect for unset fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2


def null() -> struct_pb2.Value:
    return struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)


def number_or_null(value: float | int | None) -> struct_pb2.Value:
    """Integral unix seconds (or any number), or null."""
    if value is None:
        return null()
    return struct_pb2.Value(number_value=int(value) if isinstance(value, float) else value)


def string_or_null(value: str | None) -> struct_pb2.Value:
    if value is None:
        return null()
    return struct_pb2.Value(string_value=value)


def from_python(value: Any) -> struct_pb2.Value:
    """Any JSON-compatible Python value (dicts, lists, scalars, None)."""
    out = struct_pb2.Value()
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int | float):
        out.number_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, dict):
        out.struct_value.SetInParent()  # `{}` is an object, not an unset value
        out.struct_value.update(value)
    elif isinstance(value, list | tuple):
        out.list_value.SetInParent()
        out.list_value.extend(value)
    else:
        raise TypeError(f"not JSON-compatible: {type(value).__name__}")
    return out


def to_python(value: struct_pb2.Value) -> Any:
    """The Python value a Value holds (None when unset or null)."""
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "struct_value":
        return {k: to_python(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [to_python(v) for v in value.list_value.values]
    if kind == "number_value":
        # JSON has one number type; Struct stores doubles. Give integers back as ints so a
        # re-serialised body says `"max_tokens": 10`, not `10.0`.
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    return getattr(value, kind)

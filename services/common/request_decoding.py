"""Request messages that do not decode: INVALID_ARGUMENT in the API's envelope, never UNKNOWN.

gRPC's aio server deserializes a unary request before the handler runs, and answers a
deserializer's exception itself: UNKNOWN, "Unexpected <class '…DecodeError'>: …", which Envoy
passed on to REST clients as a 500 naming the Python class. `guarded` wraps a method's
deserializer (`grpc_server` does it for every method it serves, public and internal, health
and reflection included): a message that does not decode (a string field that is not UTF-8,
as the transcoder passes `GET /v1/batches/%ff`; a truncated or corrupt message) becomes a 400
`invalid_value` naming the field when the wire shows which one. A unary request's error is
handed to the handler as an `Undecodable`, which the guard raises once the caller is checked;
a streamed request's is raised where the handler reads that message, inside the guard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from batchgate.services.common import errors

log = logging.getLogger(__name__)

CODE = "invalid_value"
SERVER_ERROR_MESSAGE = "The server had an error while processing your request."
_MAX_DEPTH = 32
_WELL_KNOWN = "google.protobuf."  # Struct, Value, wrappers: the field holding one is named
_LENGTH_DELIMITED, _FIXED = 2, {1: 8, 5: 4}

Deserializer = Callable[[bytes], Any]


@dataclass(frozen=True)
class Undecodable:
    """What a unary handler receives instead of a request that did not decode."""

    error: errors.ApiError


class _Truncated(Exception):
    pass


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(raw) and shift < 64:
        byte = raw[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
    raise _Truncated


def _bad_utf8_in(field: FieldDescriptor, chunk: bytes, depth: int) -> str | None:
    if field.type == FieldDescriptor.TYPE_STRING:
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return str(field.name)
        return None
    if field.type != FieldDescriptor.TYPE_MESSAGE or depth >= _MAX_DEPTH:
        return None
    inner_type = field.message_type
    inner = _bad_utf8_field(inner_type, chunk, depth + 1)
    if inner is None:
        return None
    if inner_type.GetOptions().map_entry or inner_type.full_name.startswith(_WELL_KNOWN):
        return str(field.name)
    return f"{field.name}.{inner}"


def _bad_utf8_field(descriptor: Descriptor, raw: bytes, depth: int = 0) -> str | None:
    """The path (`a.b`) of the first string field of `raw`, a `descriptor` message on the
    wire, that is not UTF-8; None when there is none (raises `_Truncated` on broken framing)."""
    pos = 0
    while pos < len(raw):
        key, pos = _varint(raw, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _varint(raw, pos)
        elif wire_type in _FIXED:
            pos += _FIXED[wire_type]
        elif wire_type == _LENGTH_DELIMITED:
            length, pos = _varint(raw, pos)
            chunk, pos = raw[pos : pos + length], pos + length
            if pos > len(raw):
                raise _Truncated
            field = descriptor.fields_by_number.get(number)
            if field is not None and (found := _bad_utf8_in(field, chunk, depth)) is not None:
                return found
        else:  # groups: nothing of ours uses them
            return None
    return None


def not_utf8(name: str) -> errors.ApiError:
    """400 `invalid_value` for a string field or query parameter whose bytes are not UTF-8."""
    return errors.invalid(f"Invalid value for '{name}': it is not valid UTF-8.", CODE, name)


def decode_error(message_type: type[Message] | None, raw: bytes) -> errors.ApiError:
    """The 400 for `raw`, which does not decode as `message_type`."""
    try:
        name = None if message_type is None else _bad_utf8_field(message_type.DESCRIPTOR, raw)
    except _Truncated:
        name = None
    if name is not None:
        return not_utf8(name)
    return errors.invalid("The request could not be decoded: the message is malformed or truncated.", CODE)


def _message_type(deserializer: Deserializer) -> type[Message] | None:
    """The message class whose `FromString` `deserializer` is, if it is one."""
    owner = getattr(deserializer, "__self__", None)
    return owner if isinstance(owner, type) and issubclass(owner, Message) else None


def guarded(deserializer: Deserializer | None, request_streaming: bool) -> Deserializer | None:
    """`deserializer` answering a message that does not decode with `decode_error`: returned
    as an `Undecodable` for a unary request, raised for a streamed one."""
    if deserializer is None:
        return None
    message_type = _message_type(deserializer)
    inner = deserializer

    def deserialize(raw: bytes) -> Any:
        try:
            return inner(raw)
        except DecodeError:
            error = decode_error(message_type, raw)
        except Exception:
            log.exception("request deserializer failed")
            error = errors.ApiError(500, SERVER_ERROR_MESSAGE, "server_error")
        if request_streaming:
            raise error
        return Undecodable(error)

    return deserialize

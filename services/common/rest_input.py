"""REST input decoded against the proto: JSON bodies and query strings, with OpenAI's errors.

Envoy's gRPC-JSON transcoder decodes neither. It silently drops unknown body fields (a
`"metdata"` typo vanishes), answers type errors in its own words (`Starting an object on a
scalar field for type endpoint`), forwards some of them as a message the server cannot parse
(a 500), and cannot tell `limit=0` from no limit. So every POST route binds its raw body to
the request message's `http_body` field (`google.api.HttpBody`), gateway/oai_errors.lua hands
the query string over as the `x-oai-query` header, and this module decodes both against the
request message's own descriptor: the proto stays the one definition of every parameter's
name and type, and each mistake gets a 400 `invalid_request_error` worded the way OpenAI
words it, with `param` the dotted/indexed path of the offending value (`metadata.k`,
`requests`, `output_expires_after.seconds`):

- `invalid_json`: the body is not JSON; `invalid_content_type`: a body that is not sent as
  JSON.
- `invalid_type`: a value of the wrong JSON type ("Invalid type for 'metadata.k': expected a
  string, but got an object instead."), a body that is not a JSON object, a query value that
  does not parse as its field's type.
- `unknown_parameter`: a body key the message does not have ("Unknown parameter:
  'metdata'."); path parameters and `http_body` itself are not body keys.
- `integer_below_min_value` / `integer_above_max_value`: an integer outside its field's type.

JSON `null` means "not given", as in proto3's JSON mapping. Unknown query parameters are
ignored, as they always were. Names are the proto (= OpenAI) names; camelCase spellings are
not accepted. Native gRPC clients set the typed fields and never reach this module's body
decoding (their `http_body` is unset).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from typing import Any, TypeVar
from urllib.parse import unquote_plus

import orjson
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from batchgate.services.common import errors, request_decoding
from batchgate.services.common import proto_values as pv

BODY_FIELD = "http_body"
QUERY_METADATA_KEY = "x-oai-query"
GZIP_METADATA_KEY = "x-oai-gzip"
REQUEST_HEAD_MAX_KB = 60
"""The largest request head (request line and headers) Envoy takes from a client, 431
`request_headers_too_large` beyond: its `max_request_headers_kb`, Envoy's default made explicit."""
FORWARDED_METADATA_MAX_BYTES = (3 * REQUEST_HEAD_MAX_KB + 16) * 1024
"""The metadata a service takes with a call. A head Envoy took reaches it with each byte at
most three times (the header itself, the path again as `x-envoy-original-path`, the query
string again as `x-oai-query`) and Envoy's own headers added. With gRPC's defaults (8 KiB,
then refusals at random up to 16 KiB) a call with a 17 KiB cookie ended RESOURCE_EXHAUSTED,
which the transcoder answers as a 429 `rate_limit_error` that clients back off and retry."""
"""Set by Envoy on a request whose non-empty body came gzip-compressed: Envoy's decompressor
passes on what inflated, nothing at all for a body that is not gzip data."""

M = TypeVar("M", bound=Message)

_F = FieldDescriptor
_INTEGER_RANGES = {
    **dict.fromkeys((_F.TYPE_INT32, _F.TYPE_SINT32, _F.TYPE_SFIXED32), (-(2**31), 2**31 - 1)),
    **dict.fromkeys((_F.TYPE_UINT32, _F.TYPE_FIXED32), (0, 2**32 - 1)),
    **dict.fromkeys((_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64), (-(2**63), 2**63 - 1)),
    **dict.fromkeys((_F.TYPE_UINT64, _F.TYPE_FIXED64), (0, 2**64 - 1)),
}
_NUMBERS = (_F.TYPE_DOUBLE, _F.TYPE_FLOAT)
_DECIMAL_INTEGER = re.compile(r"-?[0-9]+")
# Messages whose JSON form is free: any value, an object, an array.
_ANY_JSON = {
    "google.protobuf.Value": None,
    "google.protobuf.Struct": dict,
    "google.protobuf.ListValue": list,
}


def _kind(value: Any) -> str:
    """How OpenAI names a JSON value's type in its errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is_map(field: FieldDescriptor) -> bool:
    return bool(field.type == _F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry)


def _expected_single(field: FieldDescriptor) -> str:
    """What one (non-repeated) value of `field` must be, in OpenAI's words."""
    if field.type == _F.TYPE_STRING:
        return "a string"
    if field.type == _F.TYPE_BOOL:
        return "a boolean"
    if field.type in _INTEGER_RANGES:
        return "an integer"
    if field.type in _NUMBERS:
        return "a number"
    if field.type == _F.TYPE_MESSAGE and _ANY_JSON.get(field.message_type.full_name) is list:
        return "an array"
    if field.type == _F.TYPE_MESSAGE:
        return "an object"
    raise TypeError(f"{field.full_name}: REST input of proto type {field.type} is not supported")


def check_supported(descriptor: Descriptor, seen: set[str] | None = None) -> None:
    """Raise TypeError if a field of `descriptor` (or of its messages) has a type this module
    cannot decode (enums, bytes, wrappers...): tests call it for every public request."""
    seen = set() if seen is None else seen
    if descriptor.full_name in seen or descriptor.full_name in _ANY_JSON:
        return
    seen.add(descriptor.full_name)
    for field in descriptor.fields:
        if field.name == BODY_FIELD:
            continue
        target = field.message_type.fields_by_name["value"] if _is_map(field) else field
        _expected_single(target)
        if target.type == _F.TYPE_MESSAGE:
            check_supported(target.message_type, seen)


def _wrong_type(path: str, expected: str, value: Any) -> errors.ApiError:
    return errors.invalid(
        f"Invalid type for '{path}': expected {expected}, but got {_kind(value)} instead.",
        "invalid_type",
        path,
    )


def _integer(field: FieldDescriptor, value: int, path: str) -> int:
    low, high = _INTEGER_RANGES[field.type]
    if value < low:
        raise errors.invalid(
            f"Invalid '{path}': integer below minimum value. Expected a value >= {low}, "
            f"but got {value} instead.",
            "integer_below_min_value",
            path,
        )
    if value > high:
        raise errors.invalid(
            f"Invalid '{path}': integer above maximum value. Expected a value <= {high}, "
            f"but got {value} instead.",
            "integer_above_max_value",
            path,
        )
    return value


def _scalar(field: FieldDescriptor, value: Any, path: str) -> Any:
    """A JSON scalar as `field`'s Python value; 400 when its type does not fit."""
    if field.type == _F.TYPE_STRING and isinstance(value, str):
        return value
    if field.type == _F.TYPE_BOOL and isinstance(value, bool):
        return value
    if field.type in _INTEGER_RANGES and not isinstance(value, bool):
        if isinstance(value, int):
            return _integer(field, value, path)
        if isinstance(value, float) and value.is_integer():  # 3600.0 is an integer in JSON
            return _integer(field, int(value), path)
    if field.type in _NUMBERS and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _wrong_type(path, _expected_single(field), value)


def _decode_object(message: Message, obj: dict[str, Any], path: str, skip: Collection[str] = ()) -> None:
    """Every key of a JSON object into the field of that name; unknown keys are refused."""
    fields = message.DESCRIPTOR.fields_by_name
    for key, value in obj.items():
        here = f"{path}.{key}" if path else key
        field = fields.get(key)
        if field is None or key in skip:
            raise errors.invalid(f"Unknown parameter: '{here}'.", "unknown_parameter", here)
        _decode_field(message, field, value, here)


def _decode_field(message: Message, field: FieldDescriptor, value: Any, path: str) -> None:
    if value is None:  # proto3 JSON: null is "not given"
        return
    if _is_map(field):
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        entries = getattr(message, field.name)
        value_field = field.message_type.fields_by_name["value"]
        for key, item in value.items():
            if value_field.type == _F.TYPE_MESSAGE:
                _decode_message(entries[key], value_field, item, f"{path}.{key}")
            else:
                entries[key] = _element(value_field, item, f"{path}.{key}")
    elif field.is_repeated:
        if not isinstance(value, list):
            raise _wrong_type(path, "an array", value)
        items = getattr(message, field.name)
        for index, item in enumerate(value):
            if field.type == _F.TYPE_MESSAGE:
                _decode_message(items.add(), field, item, f"{path}[{index}]")
            else:
                items.append(_element(field, item, f"{path}[{index}]"))
    elif field.type == _F.TYPE_MESSAGE:
        _decode_message(getattr(message, field.name), field, value, path)
    else:
        setattr(message, field.name, _scalar(field, value, path))


def _element(field: FieldDescriptor, value: Any, path: str) -> Any:
    """One scalar inside an array or a map: null is not a value there."""
    if value is None:
        raise _wrong_type(path, _expected_single(field), value)
    return _scalar(field, value, path)


def _decode_message(target: Message, field: FieldDescriptor, value: Any, path: str) -> None:
    """One message value: free JSON for Value/Struct/ListValue, else an object of fields. The
    field is set even by an empty one (`{}`, `[]`): it had read as not given at all."""
    target.SetInParent()
    name = field.message_type.full_name
    if name not in _ANY_JSON:
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        _decode_object(target, value, path)
        return
    shape = _ANY_JSON[name]
    if shape is not None and not isinstance(value, shape):
        raise _wrong_type(path, _expected_single(field), value)
    if shape is None:
        target.CopyFrom(pv.from_python(value))
    elif shape is dict:
        target.update(value)
    else:
        target.extend(value)


def _is_json(content_type: str) -> bool:
    """`application/json` or a `+json` type; a body sent with none is not JSON (README)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def decode_body(request: M, keep_json: Collection[str] = ()) -> tuple[M, dict[str, Any]]:
    """The typed request a REST body stands for, and the values of the `keep_json` fields.

    `request` is what Envoy forwards: path parameters in their fields, the raw body in
    `http_body`. The answer is a new message with the path parameters and every body field
    set, except the top-level fields named in `keep_json`: those are checked (an array for a
    repeated field) and handed back as decoded JSON, which spares building protobuf Values
    for data the caller only writes out again (inline requests). A request without
    `http_body` (native gRPC) comes back as it is, with no JSON values.
    """
    if not request.HasField(BODY_FIELD):
        return request, {}
    body = getattr(request, BODY_FIELD)
    typed = type(request)()
    typed.CopyFrom(request)
    typed.ClearField(BODY_FIELD)
    path_params = {field.name for field, _ in typed.ListFields()}
    if not body.data:
        return typed, {}
    if not _is_json(body.content_type):
        sent = f"as '{body.content_type[:100]}'" if body.content_type else "without a Content-Type"
        raise errors.invalid(
            f"The body must be JSON, sent with 'Content-Type: application/json'; this one was sent {sent}.",
            "invalid_content_type",
        )
    try:
        obj = orjson.loads(body.data)
    except orjson.JSONDecodeError as exc:
        raise errors.invalid(
            f"We could not parse the JSON body of your request ({_why_unreadable(body.data, exc)}). "
            "Send a JSON object.",
            "invalid_json",
        ) from None
    if not isinstance(obj, dict):
        raise errors.invalid(
            f"The request body must be a JSON object, but got {_kind(obj)} instead.", "invalid_type"
        )
    fields = typed.DESCRIPTOR.fields_by_name
    kept: dict[str, Any] = {}
    for name in keep_json:
        value = obj.pop(name, None)
        if value is None:
            continue
        if fields[name].is_repeated and not isinstance(value, list):
            raise _wrong_type(name, "an array", value)
        kept[name] = value
    try:
        _decode_object(typed, obj, "", skip={*path_params, BODY_FIELD})
    except RecursionError:  # protobuf's Struct nests in Python; orjson took up to 1,024 levels
        raise errors.invalid("The request body is nested too deeply to read.", "invalid_json") from None
    return typed, kept


def _why_unreadable(data: bytes, exc: orjson.JSONDecodeError) -> str:
    """orjson's reason, but in plain words where its own misleads: bytes that are not UTF-8 read
    as "surrogates not allowed" at column 1, wherever they are."""
    if data.startswith(b"\xef\xbb\xbf"):
        return "it starts with a UTF-8 byte order mark; send the JSON without one"
    try:
        data.decode()
    except UnicodeDecodeError as bad:
        return f"it is not valid UTF-8 at byte {bad.start}"
    return str(exc)


def gzip_coded(metadata: Iterable[tuple[str, Any]]) -> bool:
    """Whether the client sent the body as gzip (the gateway marks such calls; Envoy inflated it)."""
    return any(name == GZIP_METADATA_KEY for name, _ in metadata)


def not_inflated() -> errors.ApiError:
    """The 400 for a gzip body that inflated to nothing (not gzip data, or cut before its first
    block): Envoy's decompressor drops what fails to inflate without a word, so the call would
    otherwise read as an empty request and the client hear of a missing field."""
    return errors.invalid(
        "The body was sent with 'Content-Encoding: gzip' but does not inflate: it is not gzip "
        "data, or it was cut short.",
        "invalid_content_encoding",
    )


def check_inflated(request: Message, metadata: Iterable[tuple[str, Any]]) -> None:
    """400 `not_inflated` for a call whose gzip body reads as no body at all."""
    if gzip_coded(metadata) and not getattr(request, BODY_FIELD).data:
        raise not_inflated()


def _query_value(field: FieldDescriptor, text: str, name: str) -> Any:
    """A query string value as `field`'s Python value; 400 when it does not parse."""
    if field.type == _F.TYPE_STRING:
        return text
    if field.type == _F.TYPE_BOOL and text.lower() in ("true", "false", "1", "0"):
        return text.lower() in ("true", "1")
    if field.type in _INTEGER_RANGES and _DECIMAL_INTEGER.fullmatch(text):
        return _integer(field, int(text), name)
    if field.type in _NUMBERS:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise errors.invalid(
        f"Invalid type for '{name}': expected {_expected_single(field)}, but got {shown!r} instead.",
        "invalid_type",
        name,
    )


def apply_query(request: Message, query: str) -> None:
    """Set `request`'s fields from a URL query string (`a=1&b=x&b=y`), decoded as a form is:
    `+` is a space, as the SDKs (httpx) send one (`%2B` a plus); read as a plus, a list filtered
    by `metadata_value=needs review` from the openai SDK found nothing.

    Path parameters (fields already set) and unknown names are left alone; a repeated field
    takes every occurrence, any other field the last one. A value whose bytes are not UTF-8 is
    400 `invalid_value`.
    """
    fields = request.DESCRIPTOR.fields_by_name
    path_params = {field.name for field, _ in request.ListFields()}
    for part in query.split("&"):
        raw_name, _, raw_value = part.partition("=")
        name = unquote_plus(raw_name, errors="replace")
        field = fields.get(name)
        if field is None or name in path_params or field.type == _F.TYPE_MESSAGE:
            continue
        try:
            text = unquote_plus(raw_value, errors="strict")
        except UnicodeDecodeError:  # as in a path: replaced, it named nothing
            raise request_decoding.not_utf8(name) from None
        value = _query_value(field, text, name)
        if field.is_repeated:
            getattr(request, name).append(value)
        else:
            setattr(request, name, value)

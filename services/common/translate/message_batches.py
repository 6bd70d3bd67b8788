"""The checks of an Anthropic Message Batches create body, `{"requests": [{custom_id, params}]}`.

Two levels, as batchgate's OpenAI side has them:
- the body as a whole (`requests_of`): an object whose `requests` holds 1 to
  `BatchLimits.max_requests` requests in at most `max_body_bytes`; otherwise `BatchRefused`,
  which carries Anthropic's error envelope (400 `invalid_request_error`, 413
  `request_too_large`);
- each request alone (`RequestChecker`): `custom_id` 1–64 of `[A-Za-z0-9_-]` and unique,
  `params` an object with a `model` the gateway offers, `max_tokens`, a non-empty `messages`,
  no `stream: true`, no `batchgate` extension (tool calling and workflows are for `/v1/batches`
  records: on a model served natively it went on unchecked, a workflow ran in a project without
  the feature and a tool_config was dropped unsaid); and where the model runs only on
  OpenAI-compatible upstreams, params that translate (`anthropic_to_chat`). Each failure is
  one `RejectedRequest` with the request's index, custom_id (as sent, even when invalid:
  `echoed_custom_id`), a stable code and a message saying what to fix; the rest run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.services.common.errors import clip
from batchgate.services.common.seen_ids import SeenIds
from batchgate.services.common.tool_config import EXTENSION_KEY
from batchgate.services.common.translate.anthropic_to_chat import ChatTarget, to_chat_request
from batchgate.services.common.translate.errors import anthropic_error_type
from batchgate.services.common.translate.shared import JsonObject, Untranslatable

CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
REQUEST_FIELDS = frozenset({"custom_id", "params"})
MAX_MESSAGE_BYTES = 512
SHOWN_CUSTOM_ID_CHARS = 80


@dataclass(frozen=True, kw_only=True)
class BatchLimits:
    """Anthropic's limits by default; a deployment may set its own."""

    max_requests: int = 100_000
    max_body_bytes: int = 256 * 1024 * 1024
    max_request_bytes: int | None = None
    """The most one request's `params` may take as compact JSON (None: no limit of its own)."""


@dataclass(frozen=True, kw_only=True)
class ModelRoute:
    """Where an offered model's requests can run."""

    anthropic: bool = False
    """An upstream speaking Anthropic's Messages API serves it: params go as they are."""
    chat_targets: tuple[ChatTarget, ...] = ()
    """The OpenAI-compatible upstreams that serve it (its provider and fallbacks)."""


Router = Callable[[str], ModelRoute | None]
"""A model name → where it runs, or None when the gateway does not offer it."""


@dataclass(frozen=True, kw_only=True)
class AcceptedRequest:
    index: int
    custom_id: str
    model: str
    params: JsonObject


@dataclass(frozen=True, kw_only=True)
class RejectedRequest:
    index: int
    custom_id: str
    """What its result carries, so that results match requests: `echoed_custom_id`."""
    code: str
    message: str
    param: str | None
    """The offending field's path inside the request (`custom_id`, `params.top_k`)."""


class BatchRefused(Exception):
    """The create body as a whole is refused (nothing is created)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> JsonObject:
        """Anthropic's error envelope for this refusal."""
        return {
            "type": "error",
            "error": {"type": anthropic_error_type(self.status), "message": self.message},
        }


def requests_of(body: Any, *, body_bytes: int, limits: BatchLimits) -> list[Any]:
    """The `requests` of a create body (`body_bytes` long), or `BatchRefused`."""
    if body_bytes > limits.max_body_bytes:
        raise BatchRefused(
            413, f"The request body is {body_bytes} bytes; the limit is {limits.max_body_bytes} bytes."
        )
    if not isinstance(body, dict):
        raise BatchRefused(400, "The request body must be a JSON object with 'requests'.")
    for key in body:
        if key != "requests":
            raise BatchRefused(400, f"'{clip(str(key), 64)}': unknown field; a batch has only 'requests'.")
    requests = body.get("requests")
    if not isinstance(requests, list):
        raise BatchRefused(400, "'requests' must be a list of {custom_id, params} objects.")
    if not requests:
        raise BatchRefused(400, "'requests' must hold at least one request.")
    if len(requests) > limits.max_requests:
        raise BatchRefused(
            400, f"'requests' holds {len(requests)} requests; the limit is {limits.max_requests} per batch."
        )
    return requests


def echoed_custom_id(custom_id: Any) -> str:
    """The `custom_id` a rejected request's result carries, so that results match requests
    (Anthropic's results type it as a string): the one sent when it is a string, valid or not;
    the JSON text of one that is not (`123` → "123"); "" when there is none."""
    if custom_id is None:
        return ""
    if isinstance(custom_id, str):
        return custom_id
    try:
        return json.dumps(custom_id, ensure_ascii=False, separators=(",", ":"), default=repr)
    except RecursionError:  # nested past what Python walks (orjson read up to 1,024 levels)
        return ""


@dataclass(kw_only=True)
class RequestChecker:
    """Checks the requests of one batch, in order (it remembers the custom_ids seen)."""

    route: Router
    limits: BatchLimits = field(default_factory=BatchLimits)
    seen_custom_ids: SeenIds = field(default_factory=SeenIds)
    """Packed: a batch may have 100,000 requests."""
    _routes: dict[str, ModelRoute | None] = field(default_factory=dict)
    """Router answers so far (a batch names few models, many times)."""

    def check(self, index: int, request: Any) -> AcceptedRequest | RejectedRequest:
        """One request's outcome; never raises, whatever the request holds."""
        raw_id = request.get("custom_id") if isinstance(request, dict) else None
        custom_id = echoed_custom_id(raw_id)

        def reject(code: str, message: str, param: str | None) -> RejectedRequest:
            text = clip(message, MAX_MESSAGE_BYTES)
            return RejectedRequest(index=index, custom_id=custom_id, code=code, message=text, param=param)

        if not isinstance(request, dict):
            return reject(
                "invalid_request", "Each request must be an object with 'custom_id' and 'params'.", None
            )
        checked = self._custom_id(raw_id)
        if isinstance(checked, tuple):
            return reject(*checked, "custom_id")
        self.seen_custom_ids.add(checked)
        for key in request:
            if key not in REQUEST_FIELDS:
                why = f"'{clip(str(key), 64)}': unknown field; a request has only 'custom_id' and 'params'."
                return reject("invalid_request", why, clip(str(key), 64))
        params = request.get("params")
        if not isinstance(params, dict):
            return reject(
                "invalid_params", "'params' must be an object of Messages API parameters.", "params"
            )
        refused = self._params(params)
        if refused is not None:
            return reject(*refused)
        return AcceptedRequest(index=index, custom_id=checked, model=params["model"], params=params)

    def _custom_id(self, custom_id: Any) -> str | tuple[str, str]:
        """`custom_id` when it is a fresh Anthropic custom_id, else (code, message)."""
        if custom_id is None:
            return "missing_custom_id", "The request has no 'custom_id'."
        if custom_id == "":
            why = "'custom_id' is empty; it must be 1 to 64 letters, digits, '_' or '-'."
            return "missing_custom_id", why
        if not isinstance(custom_id, str):
            return "invalid_custom_id", "'custom_id' must be a string."
        shown = repr(clip(custom_id, SHOWN_CUSTOM_ID_CHARS))
        if not CUSTOM_ID.fullmatch(custom_id):
            return "invalid_custom_id", f"'custom_id' {shown} must be 1 to 64 letters, digits, '_' or '-'."
        if custom_id in self.seen_custom_ids:
            return "duplicate_custom_id", f"'custom_id' {shown} appears more than once in this batch."
        return custom_id

    def _params(self, params: JsonObject) -> tuple[str, str, str] | None:
        """(code, message, param) when `params` cannot run here."""
        if params.get("stream") is True:
            return "stream_not_supported", "'params.stream' must not be true in a batch.", "params.stream"
        if EXTENSION_KEY in params:
            why = (
                "'params.batchgate' is not a Messages API parameter; tool calling and workflows "
                "are for /v1/batches."
            )
            return "unsupported_parameter", why, "params.batchgate"
        max_tokens = params.get("max_tokens")
        if max_tokens is None:
            return "missing_max_tokens", "'params.max_tokens' is required.", "params.max_tokens"
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            why = "'params.max_tokens' must be a whole number."
            return "invalid_max_tokens", why, "params.max_tokens"
        if max_tokens < 0:
            why = (
                f"'params.max_tokens' is {max_tokens}; it must be at least 1 "
                "(0 only pre-warms the prompt cache)."
            )
            return "invalid_max_tokens", why, "params.max_tokens"
        model = params.get("model")
        if not isinstance(model, str) or not model:
            return "missing_model", "'params.model' must be a non-empty string.", "params.model"
        messages = params.get("messages")
        if not isinstance(messages, list) or not messages:
            why = "'params.messages' must be a non-empty list of messages."
            return "invalid_messages", why, "params.messages"
        too_large = self._too_large(params)
        return too_large if too_large is not None else self._runnable(model, params)

    def _too_large(self, params: JsonObject) -> tuple[str, str, str] | None:
        limit = self.limits.max_request_bytes
        if limit is None:
            return None
        size = len(orjson.dumps(params))
        if size <= limit:
            return None
        return "record_too_large", f"'params' is {size} bytes; the limit is {limit}.", "params"

    def _runnable(self, model: str, params: JsonObject) -> tuple[str, str, str] | None:
        """Whether some upstream serving `model` can take `params` (translated if need be)."""
        if model not in self._routes:
            self._routes[model] = self.route(model)
        route = self._routes[model]
        if route is None:
            shown = repr(clip(model, 256))
            return "model_not_found", f"The model {shown} is not offered by this gateway.", "params.model"
        if route.anthropic:
            return None
        first: Untranslatable | None = None
        for target in route.chat_targets:
            try:
                to_chat_request(params, model=model, target=target)
            except Untranslatable as exc:
                first = first or exc
            else:
                return None
        if first is None:
            return "model_not_found", f"No upstream serves the model {model!r}.", "params.model"
        param = f"params.{first.param}" if first.param else "params"
        message = first.message.replace(f"'{first.param}'", f"'{param}'", 1)  # the path within the request
        why = (
            f"The model {model!r} runs on an OpenAI-compatible upstream here, and this request "
            f"cannot be translated for it: {message}"
        )
        return "unsupported_parameter", why, param


def check_create(
    body: Any, *, body_bytes: int, route: Router, limits: BatchLimits | None = None
) -> list[AcceptedRequest | RejectedRequest]:
    """Every request's outcome, in order, or `BatchRefused` for the body as a whole."""
    limits = limits or BatchLimits()
    checker = RequestChecker(route=route, limits=limits)
    return [
        checker.check(index, request)
        for index, request in enumerate(requests_of(body, body_bytes=body_bytes, limits=limits))
    ]

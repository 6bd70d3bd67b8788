"""A create's checks of the request itself (not its records), before anything is stored:
endpoint, completion window, metadata, priority, output expiry and the input file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from batchgate.services.common import errors
from batchgate.services.common import proto_values as pv
from batchgate.services.common.batch_modes import batch_provider, default_execution
from batchgate.services.common.catalogue import BATCH_MODES, EXECUTE, NATIVE
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow
from batchgate.services.common.states import FilePurpose
from batchgate.services.common.windows import parse_window
from batchgate.services.ingest.batch_shape import BatchShape
from batchgate.services.ingest.simple_form import check_model, check_name
from batchgate.v1 import batches_pb2

MIN_OUTPUT_EXPIRY_S = 3600
MAX_OUTPUT_EXPIRY_S = 30 * 86400
METADATA_MAX_PAIRS = 16
METADATA_MAX_KEY = 64
METADATA_MAX_VALUE = 512


@dataclass(frozen=True, kw_only=True)
class CreateOptions:
    """What the request asks for beyond its records, checked before anything is stored."""

    tier: int
    priority: int
    priority_spelling: str | None
    output_expiry_s: int | None
    window_s: int


def check_request(shape: BatchShape, request: batches_pb2.CreateBatchRequest, inline: list[Any]) -> None:
    """The request's own fields (400 on the first bad one, the endpoint first: a batch-level
    model is checked for it); `shape` says which endpoints and windows its API accepts."""
    if request.endpoint not in shape.endpoints:
        raise errors.invalid(
            f"Unsupported endpoint {request.endpoint!r}; supported: {', '.join(shape.endpoints)}.",
            "invalid_endpoint",
            "endpoint",
        )
    check_model(shape.settings, request)
    check_name(request)
    if request.completion_window not in shape.windows:
        raise errors.invalid(
            f"'completion_window' must be one of {list(shape.windows)}.",
            "invalid_completion_window",
            "completion_window",
        )
    check_metadata(dict(request.metadata))
    if request.execution and request.execution not in BATCH_MODES:
        raise errors.invalid(
            f"'execution' must be one of {[str(mode) for mode in BATCH_MODES]}.",
            "invalid_execution",
            "execution",
        )
    if bool(request.input_file_id) == bool(inline):
        raise errors.invalid(
            "Give either 'input_file_id' or inline 'requests'.", "missing_input", "input_file_id"
        )


def check_source(settings: Settings, source: AnyRow) -> None:
    """The input file can feed a batch: purpose `batch`, within the size limit."""
    if source.purpose != FilePurpose.BATCH:
        raise errors.invalid(
            f"File {source.id!r} has purpose {source.purpose!r}; batches need 'batch'.",
            "invalid_input_file",
            "input_file_id",
        )
    if source.bytes > settings.max_file_bytes:
        raise errors.invalid(
            f"The input is {source.bytes} bytes; the limit is {settings.max_file_bytes}.",
            "input_too_large",
            "input_file_id",
        )


def request_options(request: batches_pb2.CreateBatchRequest) -> CreateOptions:
    """The request's priority, output expiry and window, checked and read once."""
    tier, priority, spelling = parse_priority(pv.to_python(request.priority))
    return CreateOptions(
        tier=tier,
        priority=priority,
        priority_spelling=spelling,
        output_expiry_s=check_output_expiry(request),
        window_s=window_seconds(request.completion_window),
    )


def window_seconds(window: str) -> int:
    """A requested `completion_window` in seconds ('24h' → 86400), read once before anything is
    stored; 400 `invalid_completion_window` when unreadable (the accepted ones were checked when
    the settings were loaded)."""
    try:
        return parse_window(window)
    except ValueError:
        raise errors.invalid(
            f"Unsupported completion_window {window!r}.", "invalid_completion_window", "completion_window"
        ) from None


def check_metadata(metadata: dict[str, str]) -> None:
    """At most 16 pairs of keys up to 64 characters and values up to 512, without NUL (which
    PostgreSQL refuses in a listing's metadata filter): 400 `invalid_metadata` otherwise."""
    if len(metadata) > METADATA_MAX_PAIRS:
        raise errors.invalid(
            f"'metadata' may hold at most {METADATA_MAX_PAIRS} pairs.", "invalid_metadata", "metadata"
        )
    for key, value in metadata.items():
        if len(key) > METADATA_MAX_KEY:
            raise errors.invalid(
                f"Metadata key {key[:80]!r} is longer than {METADATA_MAX_KEY} characters.",
                "invalid_metadata",
                "metadata",
            )
        if "\x00" in key:
            raise errors.invalid(
                f"Metadata key {key!r} must not contain NUL characters.", "invalid_metadata", "metadata"
            )
        if len(value) > METADATA_MAX_VALUE:
            raise errors.invalid(
                f"Metadata value of {key!r} is longer than {METADATA_MAX_VALUE} characters.",
                "invalid_metadata",
                f"metadata.{key}",
            )
        if "\x00" in value:
            raise errors.invalid(
                f"Metadata value of {key!r} must not contain NUL characters.",
                "invalid_metadata",
                f"metadata.{key}",
            )


def parse_priority(value: Any) -> tuple[int, int, str | None]:
    """(tier, integer priority, spelling to echo back) from `standard`/`expedited`/an integer."""
    if value is None or value == "standard":
        return 0, 0, None
    if value == "expedited":
        return 1, 0, orjson.dumps(value).decode()
    if isinstance(value, int) and not isinstance(value, bool) and -1_000_000 <= value <= 1_000_000:
        return 0, value, orjson.dumps(value).decode()
    raise errors.invalid(
        "'priority' must be 'standard', 'expedited' or an integer.", "invalid_priority", "priority"
    )


def check_output_expiry(request: batches_pb2.CreateBatchRequest) -> int | None:
    """Seconds the output and error files live, from `output_expires_after` (or None)."""
    if not request.HasField("output_expires_after"):
        return None
    expiry = request.output_expires_after
    if expiry.anchor != "created_at":
        raise errors.invalid(
            "'output_expires_after.anchor' must be 'created_at'.",
            "invalid_output_expires_after",
            "output_expires_after.anchor",
        )
    if not MIN_OUTPUT_EXPIRY_S <= expiry.seconds <= MAX_OUTPUT_EXPIRY_S:
        raise errors.invalid(
            f"'output_expires_after.seconds' must be between {MIN_OUTPUT_EXPIRY_S} and "
            f"{MAX_OUTPUT_EXPIRY_S}.",
            "invalid_output_expires_after",
            "output_expires_after.seconds",
        )
    return int(expiry.seconds)


@dataclass(frozen=True)
class Execution:
    """How the batch runs, and its discount (a native batch's is its provider's)."""

    mode: str
    discount: float


def batch_execution(
    settings: Settings,
    requested: str,
    model: str | None,
    discount: float,
    *,
    message_batch: bool = False,
    mixed: bool = False,
    loops: bool = False,
) -> Execution:
    """The execution a batch of `model` gets: the request's, else the model's configured one;
    400 `native_unsupported` when native is asked of a model whose provider has no batch API,
    or of a batch whose records name more than one model (`mixed`: some were rejected
    `model_mismatch`), whichever model came first. `discount` is the tier's, kept for executed
    batches. Records that call tools or run a workflow (`loops`) never go native, asked or by
    the model's default: the provider would get their `batchgate` section, the tool server's
    `authorization` in it, and run neither the tools nor the workflow.

    A Message Batch (Anthropic-shaped items) always runs on our executors, whatever the model's
    `batch_mode`: the pass-through submits OpenAI-shaped records only, so asking one to run
    natively is 400 `native_unsupported`."""
    if message_batch:
        if requested == NATIVE:
            raise errors.invalid(
                "Message Batches run on batchgate's executors; native execution is not supported.",
                "native_unsupported",
                "execution",
            )
        return Execution(EXECUTE, discount)
    if requested == NATIVE and mixed:
        raise errors.invalid(
            "Native execution needs every record to ask for the same model; these records name "
            f"more than one (the first is {model!r}).",
            "native_unsupported",
            "execution",
        )
    mode = requested or default_execution(settings, model)
    if mode == EXECUTE:
        return Execution(EXECUTE, discount)
    if loops:
        raise errors.invalid(
            "Records with 'batchgate.tool_config' or 'batchgate.workflow' run on batchgate's "
            "executors; use execution 'execute'.",
            "native_unsupported",
            "execution",
        )
    provider = batch_provider(settings, model)
    if provider is None:
        raise errors.invalid(
            f"Model {model!r} has no provider batch API configured; use execution 'execute'."
            if model
            else "Native execution needs every record to ask for the same model.",
            "native_unsupported",
            "execution",
        )
    return Execution(NATIVE, provider.batch_discount)

from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetryBatchRequest(_message.Message):
    __slots__ = ("batch_id", "only", "model", "http_body")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ONLY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    only: str
    model: str
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, batch_id: _Optional[str] = ..., only: _Optional[str] = ..., model: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class CreateBatchRequest(_message.Message):
    __slots__ = ("input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after", "requests", "priority", "webhook_url", "http_body", "cron", "cron_timezone", "model", "name", "dry_run", "execution")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_WINDOW_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_EXPIRES_AFTER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    CRON_TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: _containers.ScalarMap[str, str]
    output_expires_after: ExpiresAfter
    requests: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    priority: _struct_pb2.Value
    webhook_url: str
    http_body: _httpbody_pb2.HttpBody
    cron: str
    cron_timezone: str
    model: str
    name: str
    dry_run: bool
    execution: str
    def __init__(self, input_file_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., completion_window: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., output_expires_after: _Optional[_Union[ExpiresAfter, _Mapping]] = ..., requests: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., priority: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., webhook_url: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ..., cron: _Optional[str] = ..., cron_timezone: _Optional[str] = ..., model: _Optional[str] = ..., name: _Optional[str] = ..., dry_run: _Optional[bool] = ..., execution: _Optional[str] = ...) -> None: ...

class ExpiresAfter(_message.Message):
    __slots__ = ("anchor", "seconds")
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    anchor: str
    seconds: int
    def __init__(self, anchor: _Optional[str] = ..., seconds: _Optional[int] = ...) -> None: ...

class GetBatchRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class ListBatchesRequest(_message.Message):
    __slots__ = ("after", "limit", "status", "metadata_key", "metadata_value", "template_id")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    METADATA_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    after: str
    limit: int
    status: str
    metadata_key: str
    metadata_value: str
    template_id: str
    def __init__(self, after: _Optional[str] = ..., limit: _Optional[int] = ..., status: _Optional[str] = ..., metadata_key: _Optional[str] = ..., metadata_value: _Optional[str] = ..., template_id: _Optional[str] = ...) -> None: ...

class ListBatchesResponse(_message.Message):
    __slots__ = ("object", "data", "first_id", "last_id", "has_more")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[Batch]
    first_id: _struct_pb2.Value
    last_id: _struct_pb2.Value
    has_more: bool
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[Batch, _Mapping]]] = ..., first_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., last_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., has_more: _Optional[bool] = ...) -> None: ...

class CancelBatchRequest(_message.Message):
    __slots__ = ("batch_id", "http_body")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, batch_id: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class UpdateBatchMetadataRequest(_message.Message):
    __slots__ = ("batch_id", "metadata", "http_body")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    metadata: _containers.ScalarMap[str, str]
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, batch_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("id", "object", "endpoint", "input_file_id", "completion_window", "status", "output_file_id", "error_file_id", "created_at", "in_progress_at", "expires_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at", "cancelled_at", "request_counts", "metadata", "errors", "model", "usage", "priority", "rejected_count", "rejected_records", "rejected_records_file_id", "webhook_url", "cost", "template_id", "next_run_at", "cron", "cron_timezone", "retry_of", "retries", "name", "dry_run", "estimate", "throughput", "execution")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_WINDOW_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    IN_PROGRESS_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FINALIZING_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_AT_FIELD_NUMBER: _ClassVar[int]
    CANCELLING_AT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_AT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_COUNTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REJECTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_RECORDS_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    CRON_TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    RETRY_OF_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    endpoint: str
    input_file_id: str
    completion_window: str
    status: str
    output_file_id: _struct_pb2.Value
    error_file_id: _struct_pb2.Value
    created_at: int
    in_progress_at: _struct_pb2.Value
    expires_at: _struct_pb2.Value
    finalizing_at: _struct_pb2.Value
    completed_at: _struct_pb2.Value
    failed_at: _struct_pb2.Value
    expired_at: _struct_pb2.Value
    cancelling_at: _struct_pb2.Value
    cancelled_at: _struct_pb2.Value
    request_counts: RequestCounts
    metadata: _struct_pb2.Value
    errors: _struct_pb2.Value
    model: _struct_pb2.Value
    usage: BatchUsage
    priority: _struct_pb2.Value
    rejected_count: int
    rejected_records: _containers.RepeatedCompositeFieldContainer[RejectedRecord]
    rejected_records_file_id: _struct_pb2.Value
    webhook_url: _struct_pb2.Value
    cost: BatchCost
    template_id: _struct_pb2.Value
    next_run_at: _struct_pb2.Value
    cron: _struct_pb2.Value
    cron_timezone: _struct_pb2.Value
    retry_of: _struct_pb2.Value
    retries: _containers.RepeatedScalarFieldContainer[str]
    name: _struct_pb2.Value
    dry_run: bool
    estimate: BatchEstimate
    throughput: _struct_pb2.Value
    execution: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., endpoint: _Optional[str] = ..., input_file_id: _Optional[str] = ..., completion_window: _Optional[str] = ..., status: _Optional[str] = ..., output_file_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error_file_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., created_at: _Optional[int] = ..., in_progress_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., expires_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., finalizing_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., completed_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., failed_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., expired_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cancelling_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cancelled_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., request_counts: _Optional[_Union[RequestCounts, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., errors: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., model: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., usage: _Optional[_Union[BatchUsage, _Mapping]] = ..., priority: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., rejected_count: _Optional[int] = ..., rejected_records: _Optional[_Iterable[_Union[RejectedRecord, _Mapping]]] = ..., rejected_records_file_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., webhook_url: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cost: _Optional[_Union[BatchCost, _Mapping]] = ..., template_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., next_run_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cron: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cron_timezone: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., retry_of: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., retries: _Optional[_Iterable[str]] = ..., name: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., dry_run: _Optional[bool] = ..., estimate: _Optional[_Union[BatchEstimate, _Mapping]] = ..., throughput: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., execution: _Optional[str] = ...) -> None: ...

class BatchEstimate(_message.Message):
    __slots__ = ("input_tokens", "max_output_tokens", "cost_min", "cost_max", "currency", "tokenizer", "hold_usd", "hold_verdict", "hold_message")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MIN_FIELD_NUMBER: _ClassVar[int]
    COST_MAX_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    HOLD_USD_FIELD_NUMBER: _ClassVar[int]
    HOLD_VERDICT_FIELD_NUMBER: _ClassVar[int]
    HOLD_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    max_output_tokens: int
    cost_min: float
    cost_max: float
    currency: str
    tokenizer: str
    hold_usd: float
    hold_verdict: str
    hold_message: str
    def __init__(self, input_tokens: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., cost_min: _Optional[float] = ..., cost_max: _Optional[float] = ..., currency: _Optional[str] = ..., tokenizer: _Optional[str] = ..., hold_usd: _Optional[float] = ..., hold_verdict: _Optional[str] = ..., hold_message: _Optional[str] = ...) -> None: ...

class RequestCounts(_message.Message):
    __slots__ = ("total", "completed", "failed")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    total: int
    completed: int
    failed: int
    def __init__(self, total: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ...) -> None: ...

class BatchUsage(_message.Message):
    __slots__ = ("input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., input_tokens_details: _Optional[_Union[InputTokensDetails, _Mapping]] = ..., output_tokens: _Optional[int] = ..., output_tokens_details: _Optional[_Union[OutputTokensDetails, _Mapping]] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class InputTokensDetails(_message.Message):
    __slots__ = ("cached_tokens",)
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cached_tokens: int
    def __init__(self, cached_tokens: _Optional[int] = ...) -> None: ...

class OutputTokensDetails(_message.Message):
    __slots__ = ("reasoning_tokens",)
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    reasoning_tokens: int
    def __init__(self, reasoning_tokens: _Optional[int] = ...) -> None: ...

class BatchCost(_message.Message):
    __slots__ = ("currency", "amount", "discount")
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    DISCOUNT_FIELD_NUMBER: _ClassVar[int]
    currency: str
    amount: float
    discount: float
    def __init__(self, currency: _Optional[str] = ..., amount: _Optional[float] = ..., discount: _Optional[float] = ...) -> None: ...

class RejectedRecord(_message.Message):
    __slots__ = ("line", "custom_id", "code", "message")
    LINE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    line: int
    custom_id: _struct_pb2.Value
    code: str
    message: str
    def __init__(self, line: _Optional[int] = ..., custom_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

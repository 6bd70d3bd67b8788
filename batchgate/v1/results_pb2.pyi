from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetBatchResultsRequest(_message.Message):
    __slots__ = ("batch_id", "partial", "state", "format")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    partial: bool
    state: str
    format: str
    def __init__(self, batch_id: _Optional[str] = ..., partial: _Optional[bool] = ..., state: _Optional[str] = ..., format: _Optional[str] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "batch_id", "model", "api_key_id", "group_by")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    start_time: int
    end_time: int
    batch_id: str
    model: str
    api_key_id: str
    group_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., batch_id: _Optional[str] = ..., model: _Optional[str] = ..., api_key_id: _Optional[str] = ..., group_by: _Optional[_Iterable[str]] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("object", "data")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[UsageGroup]
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[UsageGroup, _Mapping]]] = ...) -> None: ...

class UsageGroup(_message.Message):
    __slots__ = ("object", "batch_id", "model", "api_key_id", "requests", "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "total_tokens", "cost", "rejected_requests")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    REJECTED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    object: str
    batch_id: _struct_pb2.Value
    model: _struct_pb2.Value
    api_key_id: _struct_pb2.Value
    requests: int
    input_tokens: float
    cached_tokens: float
    output_tokens: float
    reasoning_tokens: float
    total_tokens: float
    cost: UsageCost
    rejected_requests: int
    def __init__(self, object: _Optional[str] = ..., batch_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., model: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., api_key_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., requests: _Optional[int] = ..., input_tokens: _Optional[float] = ..., cached_tokens: _Optional[float] = ..., output_tokens: _Optional[float] = ..., reasoning_tokens: _Optional[float] = ..., total_tokens: _Optional[float] = ..., cost: _Optional[_Union[UsageCost, _Mapping]] = ..., rejected_requests: _Optional[int] = ...) -> None: ...

class UsageCost(_message.Message):
    __slots__ = ("currency", "amount")
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    currency: str
    amount: float
    def __init__(self, currency: _Optional[str] = ..., amount: _Optional[float] = ...) -> None: ...

class ListUsageEventsRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "batch_id", "model", "api_key_id", "after", "limit")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    start_time: int
    end_time: int
    batch_id: str
    model: str
    api_key_id: str
    after: str
    limit: int
    def __init__(self, start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., batch_id: _Optional[str] = ..., model: _Optional[str] = ..., api_key_id: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListUsageEventsResponse(_message.Message):
    __slots__ = ("object", "data", "first_id", "last_id", "has_more")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[UsageEvent]
    first_id: _struct_pb2.Value
    last_id: _struct_pb2.Value
    has_more: bool
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[UsageEvent, _Mapping]]] = ..., first_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., last_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., has_more: _Optional[bool] = ...) -> None: ...

class UsageEvent(_message.Message):
    __slots__ = ("id", "object", "created_at", "source", "batch_id", "item_index", "custom_id", "api_key_id", "model", "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "total_tokens", "cost")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_INDEX_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_ID_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created_at: int
    source: str
    batch_id: str
    item_index: int
    custom_id: _struct_pb2.Value
    api_key_id: str
    model: str
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost: UsageCost
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created_at: _Optional[int] = ..., source: _Optional[str] = ..., batch_id: _Optional[str] = ..., item_index: _Optional[int] = ..., custom_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., api_key_id: _Optional[str] = ..., model: _Optional[str] = ..., input_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cost: _Optional[_Union[UsageCost, _Mapping]] = ...) -> None: ...

class ListWebhookDeliveriesRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesResponse(_message.Message):
    __slots__ = ("object", "data")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[WebhookDelivery]
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[WebhookDelivery, _Mapping]]] = ...) -> None: ...

class WebhookDelivery(_message.Message):
    __slots__ = ("id", "object", "type", "url", "status", "created_at", "next_attempt_at", "delivered_at", "attempt_count", "attempts", "payload")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    type: str
    url: str
    status: str
    created_at: int
    next_attempt_at: _struct_pb2.Value
    delivered_at: _struct_pb2.Value
    attempt_count: int
    attempts: _containers.RepeatedCompositeFieldContainer[WebhookAttempt]
    payload: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., type: _Optional[str] = ..., url: _Optional[str] = ..., status: _Optional[str] = ..., created_at: _Optional[int] = ..., next_attempt_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., delivered_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., attempt_count: _Optional[int] = ..., attempts: _Optional[_Iterable[_Union[WebhookAttempt, _Mapping]]] = ..., payload: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class WebhookAttempt(_message.Message):
    __slots__ = ("attempt", "started_at", "finished_at", "status_code", "error")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    started_at: int
    finished_at: _struct_pb2.Value
    status_code: _struct_pb2.Value
    error: _struct_pb2.Value
    def __init__(self, attempt: _Optional[int] = ..., started_at: _Optional[int] = ..., finished_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., status_code: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

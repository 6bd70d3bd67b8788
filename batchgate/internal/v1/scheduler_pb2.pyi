from batchgate.internal.v1 import items_pb2 as _items_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitBatchRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class SubmitBatchResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LeaseItemsRequest(_message.Message):
    __slots__ = ("executor_id", "max_items", "wait_ms", "request_id", "retry", "outrank")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    OUTRANK_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    max_items: int
    wait_ms: int
    request_id: str
    retry: bool
    outrank: Priority
    def __init__(self, executor_id: _Optional[str] = ..., max_items: _Optional[int] = ..., wait_ms: _Optional[int] = ..., request_id: _Optional[str] = ..., retry: _Optional[bool] = ..., outrank: _Optional[_Union[Priority, _Mapping]] = ...) -> None: ...

class Priority(_message.Message):
    __slots__ = ("tier", "priority")
    TIER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    tier: int
    priority: int
    def __init__(self, tier: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class LeasedItem(_message.Message):
    __slots__ = ("ref", "custom_id", "endpoint", "model", "body", "traceparent", "project_id", "priority_tier", "priority", "expires_at", "models_bounded", "allowed_models")
    REF_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_TIER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    MODELS_BOUNDED_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_MODELS_FIELD_NUMBER: _ClassVar[int]
    ref: _items_pb2.ItemRef
    custom_id: str
    endpoint: str
    model: str
    body: bytes
    traceparent: str
    project_id: str
    priority_tier: int
    priority: int
    expires_at: float
    models_bounded: bool
    allowed_models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ref: _Optional[_Union[_items_pb2.ItemRef, _Mapping]] = ..., custom_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., model: _Optional[str] = ..., body: _Optional[bytes] = ..., traceparent: _Optional[str] = ..., project_id: _Optional[str] = ..., priority_tier: _Optional[int] = ..., priority: _Optional[int] = ..., expires_at: _Optional[float] = ..., models_bounded: _Optional[bool] = ..., allowed_models: _Optional[_Iterable[str]] = ...) -> None: ...

class LeaseItemsResponse(_message.Message):
    __slots__ = ("items", "lease_ttl_ms")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[LeasedItem]
    lease_ttl_ms: int
    def __init__(self, items: _Optional[_Iterable[_Union[LeasedItem, _Mapping]]] = ..., lease_ttl_ms: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("executor_id", "batch_ids")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_IDS_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    batch_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, executor_id: _Optional[str] = ..., batch_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ClosingBatch(_message.Message):
    __slots__ = ("batch_id", "hard")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    HARD_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    hard: bool
    def __init__(self, batch_id: _Optional[str] = ..., hard: _Optional[bool] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("alive", "closing")
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    CLOSING_FIELD_NUMBER: _ClassVar[int]
    alive: bool
    closing: _containers.RepeatedCompositeFieldContainer[ClosingBatch]
    def __init__(self, alive: _Optional[bool] = ..., closing: _Optional[_Iterable[_Union[ClosingBatch, _Mapping]]] = ...) -> None: ...

class ReleaseItemsRequest(_message.Message):
    __slots__ = ("executor_id", "items")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    items: _containers.RepeatedCompositeFieldContainer[_items_pb2.ItemRef]
    def __init__(self, executor_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[_items_pb2.ItemRef, _Mapping]]] = ...) -> None: ...

class ReleaseItemsResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: int
    def __init__(self, released: _Optional[int] = ...) -> None: ...

class CancelBatchRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class CancelBatchResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

class WatchClosingBatchesRequest(_message.Message):
    __slots__ = ("executor_id",)
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    def __init__(self, executor_id: _Optional[str] = ...) -> None: ...

class WatchClosingBatchesResponse(_message.Message):
    __slots__ = ("closing",)
    CLOSING_FIELD_NUMBER: _ClassVar[int]
    closing: ClosingBatch
    def __init__(self, closing: _Optional[_Union[ClosingBatch, _Mapping]] = ...) -> None: ...

class BudgetAsk(_message.Message):
    __slots__ = ("key_id", "requests_per_minute", "tokens_per_minute", "requests_needed", "requests_wanted", "tokens_needed", "tokens_wanted")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_NEEDED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_WANTED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_NEEDED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_WANTED_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    requests_per_minute: float
    tokens_per_minute: float
    requests_needed: float
    requests_wanted: float
    tokens_needed: float
    tokens_wanted: float
    def __init__(self, key_id: _Optional[str] = ..., requests_per_minute: _Optional[float] = ..., tokens_per_minute: _Optional[float] = ..., requests_needed: _Optional[float] = ..., requests_wanted: _Optional[float] = ..., tokens_needed: _Optional[float] = ..., tokens_wanted: _Optional[float] = ...) -> None: ...

class GrantBudgetRequest(_message.Message):
    __slots__ = ("executor_id", "asks")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ASKS_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    asks: _containers.RepeatedCompositeFieldContainer[BudgetAsk]
    def __init__(self, executor_id: _Optional[str] = ..., asks: _Optional[_Iterable[_Union[BudgetAsk, _Mapping]]] = ...) -> None: ...

class BudgetGrant(_message.Message):
    __slots__ = ("key_id", "requests", "tokens", "retry_after_ms")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    requests: float
    tokens: float
    retry_after_ms: int
    def __init__(self, key_id: _Optional[str] = ..., requests: _Optional[float] = ..., tokens: _Optional[float] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class GrantBudgetResponse(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[BudgetGrant]
    def __init__(self, grants: _Optional[_Iterable[_Union[BudgetGrant, _Mapping]]] = ...) -> None: ...

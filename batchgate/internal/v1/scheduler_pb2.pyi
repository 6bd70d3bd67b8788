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
    __slots__ = ("executor_id", "max_items", "wait_ms")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    max_items: int
    wait_ms: int
    def __init__(self, executor_id: _Optional[str] = ..., max_items: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class LeasedItem(_message.Message):
    __slots__ = ("ref", "custom_id", "endpoint", "model", "body", "traceparent", "lease_expires_at_ms", "project_id")
    REF_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    ref: _items_pb2.ItemRef
    custom_id: str
    endpoint: str
    model: str
    body: bytes
    traceparent: str
    lease_expires_at_ms: int
    project_id: str
    def __init__(self, ref: _Optional[_Union[_items_pb2.ItemRef, _Mapping]] = ..., custom_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., model: _Optional[str] = ..., body: _Optional[bytes] = ..., traceparent: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., project_id: _Optional[str] = ...) -> None: ...

class LeaseItemsResponse(_message.Message):
    __slots__ = ("items", "lease_ttl_ms")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[LeasedItem]
    lease_ttl_ms: int
    def __init__(self, items: _Optional[_Iterable[_Union[LeasedItem, _Mapping]]] = ..., lease_ttl_ms: _Optional[int] = ...) -> None: ...

class RenewLeasesRequest(_message.Message):
    __slots__ = ("executor_id", "items")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    items: _containers.RepeatedCompositeFieldContainer[_items_pb2.ItemRef]
    def __init__(self, executor_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[_items_pb2.ItemRef, _Mapping]]] = ...) -> None: ...

class RenewLeasesResponse(_message.Message):
    __slots__ = ("lost", "lease_expires_at_ms")
    LOST_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    lost: _containers.RepeatedCompositeFieldContainer[_items_pb2.ItemRef]
    lease_expires_at_ms: int
    def __init__(self, lost: _Optional[_Iterable[_Union[_items_pb2.ItemRef, _Mapping]]] = ..., lease_expires_at_ms: _Optional[int] = ...) -> None: ...

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

class ListClosingBatchesRequest(_message.Message):
    __slots__ = ("batch_ids",)
    BATCH_IDS_FIELD_NUMBER: _ClassVar[int]
    batch_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, batch_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ListClosingBatchesResponse(_message.Message):
    __slots__ = ("batch_ids",)
    BATCH_IDS_FIELD_NUMBER: _ClassVar[int]
    batch_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, batch_ids: _Optional[_Iterable[str]] = ...) -> None: ...

from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateMessageBatchRequest(_message.Message):
    __slots__ = ("requests", "http_body")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, requests: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class GetMessageBatchRequest(_message.Message):
    __slots__ = ("message_batch_id",)
    MESSAGE_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    message_batch_id: str
    def __init__(self, message_batch_id: _Optional[str] = ...) -> None: ...

class ListMessageBatchesRequest(_message.Message):
    __slots__ = ("after_id", "before_id", "limit")
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_id: str
    before_id: str
    limit: int
    def __init__(self, after_id: _Optional[str] = ..., before_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListMessageBatchesResponse(_message.Message):
    __slots__ = ("data", "has_more", "first_id", "last_id")
    DATA_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[MessageBatch]
    has_more: bool
    first_id: _struct_pb2.Value
    last_id: _struct_pb2.Value
    def __init__(self, data: _Optional[_Iterable[_Union[MessageBatch, _Mapping]]] = ..., has_more: _Optional[bool] = ..., first_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., last_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class CancelMessageBatchRequest(_message.Message):
    __slots__ = ("message_batch_id", "http_body")
    MESSAGE_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    message_batch_id: str
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, message_batch_id: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class DeleteMessageBatchRequest(_message.Message):
    __slots__ = ("message_batch_id",)
    MESSAGE_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    message_batch_id: str
    def __init__(self, message_batch_id: _Optional[str] = ...) -> None: ...

class DeletedMessageBatch(_message.Message):
    __slots__ = ("id", "type")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class GetMessageBatchResultsRequest(_message.Message):
    __slots__ = ("message_batch_id",)
    MESSAGE_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    message_batch_id: str
    def __init__(self, message_batch_id: _Optional[str] = ...) -> None: ...

class MessageBatch(_message.Message):
    __slots__ = ("id", "type", "processing_status", "request_counts", "ended_at", "created_at", "expires_at", "archived_at", "cancel_initiated_at", "results_url")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROCESSING_STATUS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_COUNTS_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_INITIATED_AT_FIELD_NUMBER: _ClassVar[int]
    RESULTS_URL_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    processing_status: str
    request_counts: MessageBatchRequestCounts
    ended_at: _struct_pb2.Value
    created_at: str
    expires_at: str
    archived_at: _struct_pb2.Value
    cancel_initiated_at: _struct_pb2.Value
    results_url: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., processing_status: _Optional[str] = ..., request_counts: _Optional[_Union[MessageBatchRequestCounts, _Mapping]] = ..., ended_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., created_at: _Optional[str] = ..., expires_at: _Optional[str] = ..., archived_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cancel_initiated_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., results_url: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class MessageBatchRequestCounts(_message.Message):
    __slots__ = ("processing", "succeeded", "errored", "canceled", "expired")
    PROCESSING_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    ERRORED_FIELD_NUMBER: _ClassVar[int]
    CANCELED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    processing: int
    succeeded: int
    errored: int
    canceled: int
    expired: int
    def __init__(self, processing: _Optional[int] = ..., succeeded: _Optional[int] = ..., errored: _Optional[int] = ..., canceled: _Optional[int] = ..., expired: _Optional[int] = ...) -> None: ...

from batchgate.v1 import batches_pb2 as _batches_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListBatchTemplatesRequest(_message.Message):
    __slots__ = ("after", "limit")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after: str
    limit: int
    def __init__(self, after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListBatchTemplatesResponse(_message.Message):
    __slots__ = ("object", "data", "first_id", "last_id", "has_more")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[BatchTemplate]
    first_id: _struct_pb2.Value
    last_id: _struct_pb2.Value
    has_more: bool
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[BatchTemplate, _Mapping]]] = ..., first_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., last_id: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., has_more: _Optional[bool] = ...) -> None: ...

class GetBatchTemplateRequest(_message.Message):
    __slots__ = ("template_id",)
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    template_id: str
    def __init__(self, template_id: _Optional[str] = ...) -> None: ...

class UpdateBatchTemplateRequest(_message.Message):
    __slots__ = ("template_id", "cron", "cron_timezone", "input_file_id", "http_body")
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    CRON_TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    template_id: str
    cron: str
    cron_timezone: str
    input_file_id: str
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, template_id: _Optional[str] = ..., cron: _Optional[str] = ..., cron_timezone: _Optional[str] = ..., input_file_id: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class PauseBatchTemplateRequest(_message.Message):
    __slots__ = ("template_id", "http_body")
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    template_id: str
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, template_id: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class ResumeBatchTemplateRequest(_message.Message):
    __slots__ = ("template_id", "http_body")
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    template_id: str
    http_body: _httpbody_pb2.HttpBody
    def __init__(self, template_id: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class DeleteBatchTemplateRequest(_message.Message):
    __slots__ = ("template_id",)
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    template_id: str
    def __init__(self, template_id: _Optional[str] = ...) -> None: ...

class DeleteBatchTemplateResponse(_message.Message):
    __slots__ = ("id", "object", "deleted")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    deleted: bool
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class BatchTemplate(_message.Message):
    __slots__ = ("id", "object", "status", "paused_reason", "cron", "cron_timezone", "next_run_at", "created_at", "input_file_id", "endpoint", "completion_window", "metadata", "priority", "webhook_url", "last_run_at", "last_error", "recent_runs")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_REASON_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    CRON_TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_WINDOW_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    RECENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    status: str
    paused_reason: _struct_pb2.Value
    cron: str
    cron_timezone: str
    next_run_at: _struct_pb2.Value
    created_at: int
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: _struct_pb2.Value
    priority: _struct_pb2.Value
    webhook_url: _struct_pb2.Value
    last_run_at: _struct_pb2.Value
    last_error: _struct_pb2.Value
    recent_runs: _containers.RepeatedCompositeFieldContainer[_batches_pb2.Batch]
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., status: _Optional[str] = ..., paused_reason: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., cron: _Optional[str] = ..., cron_timezone: _Optional[str] = ..., next_run_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., created_at: _Optional[int] = ..., input_file_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., completion_window: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., priority: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., webhook_url: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., last_run_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., last_error: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., recent_runs: _Optional[_Iterable[_Union[_batches_pb2.Batch, _Mapping]]] = ...) -> None: ...

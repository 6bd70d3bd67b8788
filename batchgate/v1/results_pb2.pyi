from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetBatchResultsRequest(_message.Message):
    __slots__ = ("batch_id", "partial", "state")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    partial: bool
    state: str
    def __init__(self, batch_id: _Optional[str] = ..., partial: _Optional[bool] = ..., state: _Optional[str] = ...) -> None: ...

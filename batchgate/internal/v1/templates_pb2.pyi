from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SpawnRunRequest(_message.Message):
    __slots__ = ("template_id", "due_at", "now")
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    template_id: str
    due_at: float
    now: float
    def __init__(self, template_id: _Optional[str] = ..., due_at: _Optional[float] = ..., now: _Optional[float] = ...) -> None: ...

class SpawnRunResponse(_message.Message):
    __slots__ = ("batch_id", "refused_code", "already_done")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    REFUSED_CODE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_DONE_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    refused_code: str
    already_done: bool
    def __init__(self, batch_id: _Optional[str] = ..., refused_code: _Optional[str] = ..., already_done: _Optional[bool] = ...) -> None: ...

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ItemRef(_message.Message):
    __slots__ = ("batch_id", "index", "attempt")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    index: int
    attempt: int
    def __init__(self, batch_id: _Optional[str] = ..., index: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetExecutorStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetExecutorStatusResponse(_message.Message):
    __slots__ = ("executor_id", "in_flight", "capacity", "finished", "refused", "lost")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    in_flight: int
    capacity: int
    finished: int
    refused: int
    lost: int
    def __init__(self, executor_id: _Optional[str] = ..., in_flight: _Optional[int] = ..., capacity: _Optional[int] = ..., finished: _Optional[int] = ..., refused: _Optional[int] = ..., lost: _Optional[int] = ...) -> None: ...

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetSpendRequest(_message.Message):
    __slots__ = ("project_id", "api_key_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    api_key_id: str
    def __init__(self, project_id: _Optional[str] = ..., api_key_id: _Optional[str] = ...) -> None: ...

class GetSpendResponse(_message.Message):
    __slots__ = ("project_spend_usd", "api_key_spend_usd")
    PROJECT_SPEND_USD_FIELD_NUMBER: _ClassVar[int]
    API_KEY_SPEND_USD_FIELD_NUMBER: _ClassVar[int]
    project_spend_usd: float
    api_key_spend_usd: float
    def __init__(self, project_spend_usd: _Optional[float] = ..., api_key_spend_usd: _Optional[float] = ...) -> None: ...

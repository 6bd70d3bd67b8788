from batchgate.internal.v1 import items_pb2 as _items_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutcomeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_STATE_UNSPECIFIED: _ClassVar[OutcomeState]
    OUTCOME_STATE_SUCCEEDED: _ClassVar[OutcomeState]
    OUTCOME_STATE_FAILED: _ClassVar[OutcomeState]
OUTCOME_STATE_UNSPECIFIED: OutcomeState
OUTCOME_STATE_SUCCEEDED: OutcomeState
OUTCOME_STATE_FAILED: OutcomeState

class TokenUsage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("ref", "state", "status_code", "response_body", "request_id", "error_code", "error_message", "model", "provider", "usage", "attempts", "latency_ms", "traceparent")
    REF_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_BODY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    ref: _items_pb2.ItemRef
    state: OutcomeState
    status_code: int
    response_body: bytes
    request_id: str
    error_code: str
    error_message: str
    model: str
    provider: str
    usage: TokenUsage
    attempts: int
    latency_ms: int
    traceparent: str
    def __init__(self, ref: _Optional[_Union[_items_pb2.ItemRef, _Mapping]] = ..., state: _Optional[_Union[OutcomeState, str]] = ..., status_code: _Optional[int] = ..., response_body: _Optional[bytes] = ..., request_id: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., model: _Optional[str] = ..., provider: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., attempts: _Optional[int] = ..., latency_ms: _Optional[int] = ..., traceparent: _Optional[str] = ...) -> None: ...

class RecordResultsRequest(_message.Message):
    __slots__ = ("executor_id", "outcomes")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    outcomes: _containers.RepeatedCompositeFieldContainer[Outcome]
    def __init__(self, executor_id: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[Outcome, _Mapping]]] = ...) -> None: ...

class RecordResultsResponse(_message.Message):
    __slots__ = ("accepted", "duplicates", "refused")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    duplicates: int
    refused: _containers.RepeatedCompositeFieldContainer[_items_pb2.ItemRef]
    def __init__(self, accepted: _Optional[int] = ..., duplicates: _Optional[int] = ..., refused: _Optional[_Iterable[_Union[_items_pb2.ItemRef, _Mapping]]] = ...) -> None: ...

class FinalizeBatchRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class FinalizeBatchResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

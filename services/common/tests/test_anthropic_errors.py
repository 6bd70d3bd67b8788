"""Every status batchgate answers on the Message Batches routes, in Anthropic's envelope."""

from __future__ import annotations

import pytest
from anthropic.types.shared.error_response import ErrorResponse

from batchgate.services.common.anthropic_errors import in_anthropic_shape, speaks_anthropic
from batchgate.services.common.errors import ApiError

# Anthropic documents these types; anthropic 2.14's ErrorResponse union does not list them.
UNTYPED_BY_THE_SDK = frozenset({"conflict_error", "request_too_large"})


@pytest.mark.parametrize(
    "status, answered, error_type",
    [
        (400, 400, "invalid_request_error"),
        (401, 401, "authentication_error"),
        (402, 402, "billing_error"),
        (403, 403, "permission_error"),
        (404, 404, "not_found_error"),
        (409, 409, "conflict_error"),
        (413, 413, "request_too_large"),
        (422, 422, "invalid_request_error"),
        (429, 429, "rate_limit_error"),
        (500, 500, "api_error"),
        (503, 529, "overloaded_error"),
    ],
)
def test_each_status_has_anthropics_error_type(status: int, answered: int, error_type: str) -> None:
    shaped = in_anthropic_shape(ApiError(status, "Nope.", "some_code", "param", {"rejected_count": 2}))
    body = shaped.body()
    assert shaped.status == answered
    assert body == {"type": "error", "error": {"type": error_type, "message": "Nope.", "rejected_count": 2}}
    if error_type not in UNTYPED_BY_THE_SDK:
        assert ErrorResponse.model_validate({**body, "request_id": None}).error.type == error_type
    assert dict(shaped.trailing_metadata())["x-oai-status"] == str(answered)
    assert in_anthropic_shape(shaped) is shaped


def test_only_the_message_batch_services_speak_anthropic() -> None:
    assert speaks_anthropic("/batchgate.v1.MessageBatchService/CreateMessageBatch")
    assert speaks_anthropic("/batchgate.v1.MessageBatchResultsService/GetMessageBatchResults")
    assert not speaks_anthropic("/batchgate.v1.BatchService/GetBatch")
    assert not speaks_anthropic("/batchgate.v1.ResultsService/GetBatchResults")

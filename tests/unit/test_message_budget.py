"""How many entries one gRPC message between the services takes (`message_budget.fitting`)."""

from __future__ import annotations

from batchgate.services.common.config import Settings
from batchgate.services.common.message_budget import ENTRY_OVERHEAD, fitting, max_body_bytes, message_budget


def test_the_oldest_entries_that_fit_and_always_one() -> None:
    assert fitting([], len, 10) == 0
    assert fitting([b"abcd", b"efgh", b"ij"], len, 10) == 3
    assert fitting([b"abcd", b"efgh", b"ijk"], len, 10) == 2
    assert (
        fitting([b"x" * 50, b"y"], len, 10) == 1
    )  # alone past the budget: still sent (and bounded upstream)


def test_a_body_of_the_largest_size_fills_a_message_within_the_grpc_limit() -> None:
    settings = Settings(grpc_max_message_bytes=64 * 2**20)
    assert (
        max_body_bytes(settings) + ENTRY_OVERHEAD
        == message_budget(settings)
        < settings.grpc_max_message_bytes
    )

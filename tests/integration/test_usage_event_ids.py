"""Usage event ids past 2**31: one event is written per item run, so a long-lived deployment
passes PostgreSQL's int4 (about 2.1 billion items), where every record call failed. Events are
recorded on the recorder's own path past that point, on both databases, and paged by their ids."""

from __future__ import annotations

from sqlalchemy import insert, text

from batchgate.services.common.caller import Principal, current_principal
from batchgate.services.common.db import Database, usage
from batchgate.services.common.db.schema import usage_events
from batchgate.services.results.servicer import ResultsServicer
from batchgate.v1 import results_pb2
from tests.integration.seed import usage_event

PAST_INT4 = 2**31 + 7


def _event(idx: int) -> dict[str, object]:
    return usage_event("default", "batch_big_ids", idx, 0.001)


async def _page(servicer: ResultsServicer, after: str) -> results_pb2.ListUsageEventsResponse:
    token = current_principal.set(Principal(project_id="default", key_id="key"))
    try:
        request = results_pb2.ListUsageEventsRequest(after=after, limit=2)
        return await servicer.ListUsageEvents(request, None)  # type: ignore[arg-type]
    finally:
        current_principal.reset(token)


async def test_events_are_recorded_and_paged_past_int4_ids(db: Database) -> None:
    async with db.write() as conn:
        if db.is_postgres:  # the column's sequence moves on, as after 2**31 items
            await conn.execute(
                text("SELECT setval(pg_get_serial_sequence('usage_events', 'id'), :n)"), {"n": PAST_INT4}
            )
        else:  # SQLite numbers the next row past the largest id
            await conn.execute(insert(usage_events).values(id=PAST_INT4, **_event(0)))
        await usage.insert_events(conn, [_event(i) for i in range(1, 4)])
    async with db.read() as conn:
        ids = list((await conn.execute(text("SELECT id FROM usage_events ORDER BY id"))).scalars())
    assert ids[-3:] == [PAST_INT4 + 1, PAST_INT4 + 2, PAST_INT4 + 3]

    servicer = ResultsServicer(db)
    page = await _page(servicer, f"usage_{PAST_INT4 + 1}")
    assert [e.id for e in page.data] == [f"usage_{PAST_INT4 + 2}", f"usage_{PAST_INT4 + 3}"]
    assert not page.has_more

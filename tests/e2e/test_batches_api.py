"""Reading, listing, cancelling batches, their metadata and priority, as SDK users do."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.e2e.ingest_client import VIAS, create_batch
from tests.execution_support import item_states, result_lines, wait_until
from tests.support import RunningStack, add_project, chat_records, upload, wait_for_batch

ENDPOINT = "/v1/chat/completions"


def _inline(content: str, **extra: object) -> dict[str, object]:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
    return {"endpoint": ENDPOINT, "completion_window": "24h", "requests": [{"body": body}], **extra}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    "priority, expected",
    [(None, "standard"), ("standard", "standard"), ("expedited", "expedited"), (7, 7), (-3, -3)],
)
def test_priority_is_read_back_as_given(
    shared_stack: RunningStack, via: str, priority: object, expected: object
) -> None:
    extra = {} if priority is None else {"priority": priority}
    created = create_batch(via, shared_stack, _inline(f"priority {priority}", **extra))
    assert created.status == 200, created.body
    assert created.body["priority"] == expected
    assert shared_stack.client().batches.retrieve(created.body["id"]).model_extra["priority"] == expected


def test_metadata_is_replaced_at_any_time_even_after_the_end(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    batch = client.batches.create(
        input_file_id=upload(client, chat_records(1, prefix="metadata")).id,
        endpoint=ENDPOINT,
        completion_window="24h",
        metadata={"stage": "created"},
    )
    url = f"{shared_stack.base_url}/batches/{batch.id}/metadata"
    auth = {"Authorization": f"Bearer {shared_stack.key}"}
    assert wait_for_batch(client, batch.id).status == "completed"
    answer = httpx.post(url, json={"metadata": {"stage": "reviewed", "by": "qa"}}, headers=auth, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["metadata"] == {"stage": "reviewed", "by": "qa"}  # replaced, not merged
    assert client.batches.retrieve(batch.id).metadata == {"stage": "reviewed", "by": "qa"}

    too_many = httpx.post(url, json={"metadata": {f"k{i}": "v" for i in range(17)}}, headers=auth, timeout=30)
    assert (too_many.status_code, too_many.json()["error"]["code"]) == (400, "invalid_metadata")
    cleared = httpx.post(url, json={"metadata": {}}, headers=auth, timeout=30)
    assert cleared.json()["metadata"] is None
    assert client.batches.retrieve(batch.id).metadata is None


@pytest.mark.parametrize(
    "body",
    [{"content": b""}, {"json": {}}, {"json": {"metadata": None}}],
    ids=["no body", "empty object", "null metadata"],
)
def test_a_metadata_update_without_metadata_is_400_and_keeps_it(
    shared_stack: RunningStack, body: dict[str, object]
) -> None:
    created = create_batch("http", shared_stack, _inline("keep metadata", metadata={"stage": "kept"}))
    assert created.status == 200, created.body
    url = f"{shared_stack.base_url}/batches/{created.body['id']}/metadata"
    headers = {"Authorization": f"Bearer {shared_stack.key}", "Content-Type": "application/json"}
    answer = httpx.post(url, headers=headers, timeout=30, **body)  # type: ignore[arg-type]
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("missing_parameter", "metadata")
    assert error["message"] == "Missing required parameter: 'metadata'."
    assert shared_stack.client().batches.retrieve(created.body["id"]).metadata == {"stage": "kept"}


def test_listing_is_newest_first_and_pages_with_after(shared_stack: RunningStack) -> None:
    add_project(shared_stack, "listing")
    client = shared_stack.client("listing")
    ids = [create_batch("http", shared_stack, _inline(f"list {i}"), "listing").body["id"] for i in range(5)]
    page = client.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2]
    assert page.has_more and page.first_id == ids[4] and page.last_id == ids[3]
    assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]  # auto-paging with after
    assert [b.id for b in client.batches.list(after=ids[1]).data] == [ids[0]]
    assert len(client.batches.list().data) == 5  # default limit 20
    for limit in (-1, 101):
        with pytest.raises(openai.BadRequestError) as caught:
            client.batches.list(limit=limit)
        assert caught.value.code == "invalid_limit"


def test_cancel_is_repeatable_and_409_once_the_batch_ended_otherwise(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    slow = chat_records(3, prefix="cancel", x_sim={"delay_ms": 1500})
    batch = client.batches.create(
        input_file_id=upload(client, slow).id, endpoint=ENDPOINT, completion_window="24h"
    )
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    assert cancelling.cancelling_at is not None
    assert client.batches.cancel(batch.id).status in ("cancelling", "cancelled")  # asking twice is fine
    done = wait_for_batch(client, batch.id)
    assert done.status == "cancelled"

    finished = client.batches.create(
        input_file_id=upload(client, chat_records(1, prefix="cancel-late")).id,
        endpoint=ENDPOINT,
        completion_window="24h",
    )
    assert wait_for_batch(client, finished.id).status == "completed"
    with pytest.raises(openai.ConflictError) as caught:
        client.batches.cancel(finished.id)
    assert caught.value.code == "batch_not_cancellable"
    assert client.batches.cancel(done.id).status == "cancelled"  # a retried cancel still succeeds


def test_a_cancel_answers_before_the_queued_items_are_closed(
    shared_stack: RunningStack, db_kind: str
) -> None:
    """Closing the queued items of a large batch is one long update; the answer does not wait
    for it (it once did, and a batch of 50,000 got a 503 after ingest's 10 s). The close is
    held back here by a lock on one queued item's row, which only PostgreSQL can take."""
    if db_kind != "postgres":
        pytest.skip("needs a row lock: PostgreSQL")
    client = shared_stack.client()
    records = chat_records(2000, prefix="held-cancel", x_sim={"delay_ms": 200})
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint=ENDPOINT, completion_window="24h"
    )
    wait_until("some running", lambda: item_states(shared_stack.database_url, batch.id)["leased"] > 0, 60)

    async def cancel_while_one_row_is_locked() -> tuple[str, int]:
        # READ COMMITTED: each statement here sees what others committed, the close included.
        engine = create_async_engine(shared_stack.database_url)
        try:
            async with engine.connect() as conn:
                locked = await conn.execute(
                    text(
                        "SELECT idx FROM items WHERE batch_id = :b AND state = 'queued'"
                        " ORDER BY idx DESC LIMIT 1 FOR UPDATE"
                    ),
                    {"b": batch.id},
                )
                assert locked.scalar_one_or_none() is not None, "nothing queued to hold back"
                # Blocks this loop, not the lock: the server holds it until the rollback.
                status = client.batches.cancel(batch.id).status
                queued = (
                    await conn.execute(
                        text("SELECT count(*) FROM items WHERE batch_id = :b AND state = 'queued'"),
                        {"b": batch.id},
                    )
                ).scalar_one()
                await conn.rollback()
                return status, queued
        finally:
            await engine.dispose()

    status, queued = asyncio.run(cancel_while_one_row_is_locked())
    assert status == "cancelling"
    assert queued > 0, "the answer waited for the close"
    done = wait_for_batch(client, batch.id, timeout_s=60)
    assert done.status == "cancelled"
    output, errors = result_lines(client, done)
    assert sorted(line["custom_id"] for line in output + errors) == sorted(r["custom_id"] for r in records)
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}


def test_listing_filters_by_status_and_metadata_tag(shared_stack: RunningStack) -> None:
    add_project(shared_stack, "filters")
    client = shared_stack.client("filters")
    url = f"{shared_stack.base_url}/batches"
    auth = {"Authorization": f"Bearer {shared_stack.keys['filters']}"}

    def create(tag: str, metadata: dict[str, str] | None, **body: object) -> str:
        return client.batches.create(
            input_file_id=upload(client, chat_records(1, prefix=tag, **body)).id,
            endpoint=ENDPOINT,
            completion_window="24h",
            metadata=metadata,
        ).id

    search = create("search", {"team": "search", "env": "prod"})
    ads = create("ads", {"team": "ads"})
    bare = create("bare", None)
    # any key: never spliced into a JSON path
    odd = create("odd", {'we"ird.key$[0]': "it's", "stage": "needs review", "sum": "1+1"})
    stopped = create("stopped", {"team": "search"}, x_sim={"delay_ms": 1500})
    client.batches.cancel(stopped)
    for batch_id in (search, ads, bare, odd, stopped):
        wait_for_batch(client, batch_id)

    def listed(**params: object) -> list[str]:
        answer = httpx.get(url, params=params, headers=auth, timeout=30)
        assert answer.status_code == 200, answer.text
        return [b["id"] for b in answer.json()["data"]]

    assert listed(metadata_key="team") == [stopped, ads, search]  # newest first
    assert listed(metadata_key="team", metadata_value="search") == [stopped, search]
    assert listed(metadata_key="team", metadata_value="nobody") == []
    assert listed(metadata_key='we"ird.key$[0]', metadata_value="it's") == [odd]
    # httpx, as the openai SDK, sends a space as `+` and a plus as `%2B`: it found nothing
    assert listed(metadata_key="stage", metadata_value="needs review") == [odd]
    assert listed(metadata_key="sum", metadata_value="1+1") == [odd]
    assert listed(status="cancelled") == [stopped]
    assert listed(status="completed", metadata_key="team", metadata_value="search") == [search]
    assert listed(status="completed") == [odd, bare, ads, search]
    first = httpx.get(url, params={"status": "completed", "limit": 2}, headers=auth, timeout=30).json()
    assert first["has_more"] and [b["id"] for b in first["data"]] == [odd, bare]
    assert listed(status="completed", after=first["last_id"]) == [ads, search]  # pages stay filtered

    bad = httpx.get(url, params={"status": "done"}, headers=auth, timeout=30)
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_status")
    lonely = httpx.get(url, params={"metadata_value": "x"}, headers=auth, timeout=30)
    assert (lonely.status_code, lonely.json()["error"]["code"]) == (400, "invalid_metadata_filter")


def test_models_lists_the_configured_public_names(shared_stack: RunningStack) -> None:
    models = shared_stack.client().models.list()
    expected = shared_stack.settings.models
    assert [m.id for m in models.data] == [m.name for m in expected]
    for model, configured in zip(models.data, expected, strict=True):
        assert (model.object, model.owned_by, model.created) == ("model", "batchgate", 0)
        assert model.model_extra["endpoints"] == list(configured.served_endpoints)
    embeddings = next(m for m in models.data if m.id == "text-embedding-3-small")
    assert embeddings.model_extra["endpoints"] == ["/v1/embeddings"]
    refused = httpx.get(f"{shared_stack.base_url}/models", timeout=30)
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "invalid_api_key")

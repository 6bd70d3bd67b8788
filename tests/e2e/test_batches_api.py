"""Reading, listing, cancelling batches, their metadata and priority, as SDK users do."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.e2e.ingest_client import VIAS, create_batch
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

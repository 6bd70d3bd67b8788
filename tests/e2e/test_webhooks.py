"""Batch-end webhooks: signed, verified by a real receiver on loopback, retried, recorded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.support import RunningStack, chat_records, db_rows, upload, wait_for_batch
from tests.webhook_receiver import WebhookReceiver, readme_verifier


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def webhook_secret(stack: RunningStack, project: str = "default") -> str:
    """The project's signing secret, read the way an operator does: `batchgate webhooks secret`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BATCHGATE_")}
    environ.update(stack.env)
    answer = subprocess.run(
        [sys.executable, "-m", "batchgate.cli", "webhooks", "secret", "--project", project],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return answer.stdout.strip()


def deliveries(stack: RunningStack, batch_id: str, project: str = "default") -> httpx.Response:
    return httpx.get(
        f"{stack.base_url}/batches/{batch_id}/webhook_deliveries",
        headers={"Authorization": f"Bearer {stack.keys[project]}"},
        timeout=30,
    )


def wait_for_delivery(stack: RunningStack, batch_id: str, status: str = "delivered") -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        data = deliveries(stack, batch_id).json()["data"]
        if data and data[0]["status"] == status:
            return data[0]
        assert time.monotonic() < deadline, data
        time.sleep(0.1)


def create_with_webhook(client: Any, url: str, prefix: str, **extra: Any) -> Any:
    return client.batches.create(
        input_file_id=upload(client, chat_records(3, prefix=prefix)).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"webhook_url": url},
        **extra,
    )


def test_batch_end_event_is_signed_and_verifies_at_a_real_receiver(
    shared_stack: RunningStack, receiver: WebhookReceiver
) -> None:
    client = shared_stack.client()
    signed_path = receiver.fresh_path("signed")
    batch = create_with_webhook(client, receiver.url(signed_path), "hook-signed", metadata={"team": "hooks"})
    assert batch.model_extra["webhook_url"] == receiver.url(signed_path)
    done = wait_for_batch(client, batch.id)
    (call,) = receiver.wait_for(signed_path, 1)

    verify = readme_verifier()  # the `standardwebhooks` library, as README shows receivers
    secret = webhook_secret(shared_stack)
    assert secret.startswith("whsec_")
    assert verify(secret, call.headers, call.body)
    assert not verify(webhook_secret(shared_stack, "other"), call.headers, call.body)
    assert not verify(secret, call.headers, call.body.replace(b"completed", b"cancelled"))
    # The openai SDK's own verifier, unchanged, as for a webhook from OpenAI.
    sdk = openai.OpenAI(api_key="unused")
    event = sdk.webhooks.unwrap(call.body, call.headers, secret=secret)
    assert (event.type, event.data.id, event.object) == ("batch.completed", batch.id, "event")
    with pytest.raises(openai.InvalidWebhookSignatureError):
        sdk.webhooks.unwrap(call.body, call.headers, secret=webhook_secret(shared_stack, "other"))

    body = orjson.loads(call.body)
    assert set(body) == {"id", "object", "type", "created_at", "data"}
    assert body["id"].startswith("evt_") and body["data"] == {"id": batch.id}
    assert done.completed_at <= body["created_at"] <= time.time() + 1
    assert call.headers["webhook-id"] == body["id"]
    assert call.headers["content-type"] == "application/json"
    assert client.batches.retrieve(event.data.id).metadata == {"team": "hooks"}

    delivery = wait_for_delivery(shared_stack, batch.id)
    assert delivery["id"] == body["id"] and delivery["type"] == "batch.completed"
    assert delivery["attempt_count"] == 1 and delivery["payload"] == body
    assert delivery["url"] == receiver.url(signed_path) and delivery["delivered_at"] >= delivery["created_at"]
    (attempt,) = delivery["attempts"]
    assert (attempt["attempt"], attempt["status_code"], attempt["error"]) == (1, 200, None)
    assert deliveries(shared_stack, batch.id, project="other").status_code == 404


def test_receiver_that_fails_twice_gets_the_event_on_the_third_attempt(
    shared_stack: RunningStack, receiver: WebhookReceiver
) -> None:
    # 1st attempt: no answer within the stack's 2 s webhook timeout; 2nd: HTTP 503; 3rd: 200.
    flaky_path = receiver.fresh_path("flaky")
    receiver.script(flaky_path, "sleep:4", 503)
    client = shared_stack.client()
    batch = create_with_webhook(client, receiver.url(flaky_path), "hook-flaky")
    wait_for_batch(client, batch.id)
    calls = receiver.wait_for(flaky_path, 3)
    delivery = wait_for_delivery(shared_stack, batch.id)

    verify = readme_verifier()
    secret = webhook_secret(shared_stack)
    assert all(verify(secret, call.headers, call.body) for call in calls)
    assert len({call.headers["webhook-id"] for call in calls}) == 1
    assert len({call.body for call in calls}) == 1
    assert delivery["attempt_count"] == 3
    first, second, third = delivery["attempts"]
    assert first["status_code"] is None and "no answer within" in first["error"]
    assert second["status_code"] == 503 and second["error"].startswith("HTTP 503")
    assert (third["status_code"], third["error"]) == (200, None)
    assert [a["attempt"] for a in delivery["attempts"]] == [1, 2, 3]
    for earlier, later in ((first, second), (second, third)):
        assert later["started_at"] >= earlier["finished_at"]
    time.sleep(1.5)  # nothing more is sent once delivered
    assert len(receiver.received(flaky_path)) == 3


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.7/hook",  # private
        "http://192.168.1.20:8080/hook",  # private
        "http://169.254.169.254/latest/meta-data",  # link-local: cloud metadata
        "http://[::1]:9000/hook",  # loopback outside the tests' allow-list (127.0.0.0/8)
        "ftp://8.8.8.8/hook",  # not http(s)
    ],
)
def test_private_or_odd_webhook_urls_are_refused_at_create(shared_stack: RunningStack, url: str) -> None:
    client = shared_stack.client()
    before = client.batches.list(limit=1).data[0].id
    with pytest.raises(openai.BadRequestError) as caught:
        create_with_webhook(client, url, "hook-refused")
    assert caught.value.code == "invalid_webhook_url"
    assert caught.value.body["param"] == "webhook_url"
    assert client.batches.list(limit=1).data[0].id == before  # nothing was created


@pytest.mark.parametrize(
    "url",
    [
        "http://" + "a" * 64 + ".com/hook",  # a DNS label over 63 characters
        "http://a..b.com/hook",  # an empty label
        "http://127.0.0.1:9/a\x00b",  # NUL (PostgreSQL refuses it in text), on an allowed address
        "http://127.0.0.1:9/a\nb",  # a line break, which URL parsing would drop silently
    ],
    ids=["long label", "empty label", "NUL", "line break"],
)
def test_webhook_urls_no_resolver_or_database_can_take_are_refused_at_create(
    shared_stack: RunningStack, url: str
) -> None:
    client = shared_stack.client()
    before = [b.id for b in client.batches.list(limit=1).data]
    input_file = upload(client, chat_records(1, prefix="hook-unusable")).id
    for dry_run in (True, False):
        with pytest.raises(openai.BadRequestError) as caught:
            client.batches.create(
                input_file_id=input_file,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                extra_body={"webhook_url": url, "dry_run": dry_run},
            )
        assert caught.value.code == "invalid_webhook_url", caught.value.body
        assert caught.value.body["param"] == "webhook_url"
    assert [b.id for b in client.batches.list(limit=1).data] == before  # nothing was created


def test_a_delivery_to_a_url_that_cannot_be_resolved_fails_that_attempt(
    shared_stack: RunningStack, receiver: WebhookReceiver
) -> None:
    """A stored URL whose host no resolver takes (stored before such URLs were refused) fails
    its attempt with the reason, and the delivery goes on being retried: it neither stalls
    unrecorded nor stops the deliverer."""
    path = receiver.fresh_path("unusable")
    receiver.script(path, "sleep:3")  # the first attempt times out after the stack's 2 s
    client = shared_stack.client()
    batch = create_with_webhook(client, receiver.url(path), "hook-unusable-later")
    wait_for_batch(client, batch.id)
    receiver.wait_for(path, 1)
    unusable = "http://" + "b" * 64 + ".example/hook"
    db_rows(
        shared_stack.database_url,
        "UPDATE webhook_deliveries SET url = :u WHERE batch_id = :b",
        u=unusable,
        b=batch.id,
    )
    deadline = time.monotonic() + 20
    while True:
        (delivery,) = deliveries(shared_stack, batch.id).json()["data"]
        finished = [a for a in delivery["attempts"] if a["finished_at"] is not None]
        if len(finished) >= 2:
            break
        assert time.monotonic() < deadline, delivery
        time.sleep(0.1)
    second = finished[1]
    assert second["status_code"] is None
    assert second["error"].startswith("refused: The host") and "not a valid host name" in second["error"]
    assert delivery["status"] == "pending" and delivery["next_attempt_at"] is not None
    # The deliverer still works: another batch's event is delivered.
    other = receiver.fresh_path("after-unusable")
    fine = create_with_webhook(client, receiver.url(other), "hook-after-unusable")
    wait_for_batch(client, fine.id)
    assert wait_for_delivery(shared_stack, fine.id)["status"] == "delivered"

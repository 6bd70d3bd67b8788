"""Provider-native batches: a second batchgate stack plays the OpenAI provider (it implements the
OpenAI Batch API), and batches of a `batch_mode: native` model go to it through its `/v1/files`
and `/v1/batches` while the user drives batchgate with the openai SDK, unchanged."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from batchgate.services.common.db.schema import batches, native_batches
from batchgate.services.common.faults import CRASH_EXIT_CODE
from tests.execution_support import FAST_RETRY
from tests.message_batch_support import params, sdk, wait_ended
from tests.reliability.test_finalize_crash import restart_core, wait_for_exit
from tests.support import (
    RunningStack,
    chat_records,
    db_rows,
    free_port,
    fresh_database,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)

LIMIT = 3  # the provider's per-batch limit in this catalogue: 7 records make 3 provider batches
PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}
NATIVE_DISCOUNT = 0.5


def write_config(path: Path, simulator_port: int, provider: RunningStack) -> str:
    """`gpt-4o-mini` executes on our simulator; `native-mini` is the provider stack's
    `gpt-4o-mini` through its batch API; `gpt-4o` is on the provider too, executed unless a
    batch asks for native."""
    doc = {
        "providers": [
            {
                "name": "simulated",
                "kind": "openai",
                "base_url": f"http://127.0.0.1:{simulator_port}/v1",
                "api_keys": ["sim"],
            },
            {
                "name": "upstream-batches",
                "kind": "openai",
                "base_url": provider.base_url,
                "api_keys": [provider.key],
                "batch_api": True,
                "batch_limit": LIMIT,
                "batch_discount": NATIVE_DISCOUNT,
            },
        ],
        "models": [
            {"name": "gpt-4o-mini", "provider": "simulated", "price": PRICE},
            {
                "name": "native-mini",
                "provider": "upstream-batches",
                "upstream_model": "gpt-4o-mini",
                "batch_mode": "native",
                "price": PRICE,
            },
            {"name": "gpt-4o", "provider": "upstream-batches", "price": PRICE},
            {
                "name": "native-broken",  # the provider knows no such model: it refuses the batch
                "provider": "upstream-batches",
                "upstream_model": "no-such-model",
                "batch_mode": "native",
            },
        ],
        "retry": FAST_RETRY,
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(scope="module")
def provider(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"provider-{db_kind}")
    with fresh_database(db_kind, tmp, prefix="bg_provider") as url, running_stack(tmp, url) as stack:
        yield stack


def native_stack(
    db_kind: str, tmp: Path, provider: RunningStack, **env: str
) -> contextlib.AbstractContextManager[RunningStack]:
    simulator_port = free_port()
    config = write_config(tmp / "catalogue.yaml", simulator_port, provider)

    @contextlib.contextmanager
    def run() -> Iterator[RunningStack]:
        with (
            fresh_database(db_kind, tmp) as url,
            running_stack(
                tmp,
                url,
                BATCHGATE_CONFIG=config,
                BATCHGATE_SIMULATOR_PORT=str(simulator_port),
                BATCHGATE_MAINTENANCE_INTERVAL_S="0.2",
                BATCHGATE_NATIVE_POLL_INTERVAL_S="0.3",
                BATCHGATE_NATIVE_POLL_MAX_INTERVAL_S="1",
                BATCHGATE_BATCH_DISCOUNT_STANDARD="0",  # executed batches pay full price here
                **env,
            ) as stack,
        ):
            yield stack

    return run()


@pytest.fixture(scope="module")
def stack(
    db_kind: str, provider: RunningStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    with native_stack(db_kind, tmp_path_factory.mktemp(f"native-{db_kind}"), provider) as running:
        yield running


def records(n: int, prefix: str, model: str = "native-mini", **extra: Any) -> list[dict[str, Any]]:
    out = chat_records(n, prefix=prefix)
    for r in out:
        r["body"]["model"] = model
        r["body"].update(extra)
    return out


def provider_batches(provider: RunningStack, token_key: str = "batchgate_token") -> list[Any]:
    return [b for b in provider.client().batches.list(limit=100) if (b.metadata or {}).get(token_key)]


def parts_of(stack: RunningStack, batch_id: str) -> list[Any]:
    return db_rows(
        stack.database_url,
        native_batches.select().where(native_batches.c.batch_id == batch_id).order_by(native_batches.c.part),
    )


def test_a_native_batch_runs_on_the_providers_batch_api_split_and_joined_in_input_order(
    stack: RunningStack, provider: RunningStack
) -> None:
    client = stack.client()
    inputs = records(7, "native-split")
    batch = client.batches.create(
        input_file_id=upload(client, inputs).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "in_progress" and batch.request_counts.total == 7
    done = wait_for_batch(client, batch.id)
    assert done.status == "completed", done
    assert done.request_counts.completed == 7 and done.request_counts.failed == 0
    lines = read_jsonl(client.files.content(done.output_file_id).content)
    assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in inputs]  # input order
    for line, record in zip(lines, inputs, strict=True):
        assert line["response"]["status_code"] == 200
        assert (
            record["body"]["messages"][0]["content"][:40]
            in line["response"]["body"]["choices"][0]["message"]["content"]
        )

    parts = parts_of(stack, batch.id)
    assert [(p.first_idx, p.end_idx) for p in parts] == [(0, 3), (3, 6), (6, 7)]
    assert all(p.provider_batch_id and p.imported and p.provider_status == "completed" for p in parts)
    seen = {b.id: b for b in provider_batches(provider)}
    assert all(seen[p.provider_batch_id].request_counts.total == (p.end_idx - p.first_idx) for p in parts)

    # usage and cost, at the provider's batch price
    usage = done.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    gross = (
        usage.input_tokens * PRICE["input_per_mtok"] + usage.output_tokens * PRICE["output_per_mtok"]
    ) / 1e6
    raw = httpx.get(
        f"{stack.base_url}/batches/{batch.id}", headers={"Authorization": f"Bearer {stack.key}"}, timeout=10
    ).json()
    assert raw["execution"] == "native"
    assert raw["cost"]["discount"] == NATIVE_DISCOUNT
    assert raw["cost"]["amount"] == pytest.approx(gross * (1 - NATIVE_DISCOUNT))


def test_execution_can_be_asked_per_batch_and_is_refused_where_no_batch_api_exists(
    stack: RunningStack,
) -> None:
    client = stack.client()
    file_id = upload(client, records(2, "native-refused", model="gpt-4o-mini")).id
    with pytest.raises(openai.BadRequestError) as refused:
        client.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            extra_body={"execution": "native"},
        )
    assert refused.value.code == "native_unsupported" and refused.value.param == "execution"
    with pytest.raises(openai.BadRequestError) as bad:
        client.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            extra_body={"execution": "sometimes"},
        )
    assert bad.value.code == "invalid_execution"
    assert not [b for b in client.batches.list(limit=100) if b.input_file_id == file_id]  # nothing half-made

    # gpt-4o's provider has a batch API: a batch may ask for it
    asked = client.batches.create(
        input_file_id=upload(client, records(2, "native-asked", model="gpt-4o")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"execution": "native"},
    )
    done = wait_for_batch(client, asked.id)
    assert done.status == "completed" and done.request_counts.completed == 2
    assert len(parts_of(stack, asked.id)) == 1


def test_results_are_409_while_a_native_batch_runs_and_cancel_is_forwarded(
    stack: RunningStack, provider: RunningStack
) -> None:
    client = stack.client()
    slow = records(4, "native-cancel", x_sim={"delay_ms": 5_000})
    batch = client.batches.create(
        input_file_id=upload(client, slow).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while not all(p.provider_batch_id for p in parts_of(stack, batch.id)) or not parts_of(stack, batch.id):
        assert time.monotonic() < deadline, "the provider batches were never created"
        time.sleep(0.2)
    for partial in ("false", "true"):
        answer = httpx.get(
            f"{stack.base_url}/batches/{batch.id}/results",
            params={"partial": partial},
            headers={"Authorization": f"Bearer {stack.key}"},
            timeout=10,
        )
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "batch_not_finished"

    assert client.batches.cancel(batch.id).status == "cancelling"
    done = wait_for_batch(client, batch.id, timeout_s=120)
    assert done.status == "cancelled"
    parts = parts_of(stack, batch.id)
    assert len(parts) == 2 and all(p.cancel_sent for p in parts)
    forwarded = [provider.client().batches.retrieve(p.provider_batch_id) for p in parts]
    assert {f.status for f in forwarded} == {"cancelled"}  # the cancel reached the provider
    # what the provider finished before its batches ended counts; the rest is cancelled
    assert done.request_counts.completed == sum(f.request_counts.completed for f in forwarded)
    assert done.request_counts.completed + done.request_counts.failed == 4
    if done.error_file_id:
        errors = read_jsonl(client.files.content(done.error_file_id).content)
        assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}


def test_polling_backs_off_while_a_provider_batch_makes_no_progress(stack: RunningStack) -> None:
    client = stack.client()
    batch = client.batches.create(
        input_file_id=upload(client, records(1, "native-backoff", x_sim={"delay_ms": 5_000})).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    deadline = time.monotonic() + 60
    while not (parts := parts_of(stack, batch.id)) or parts[0].poll_interval_s < 1:
        assert time.monotonic() < deadline, f"no backoff: {parts}"
        time.sleep(0.2)
    assert parts[0].poll_interval_s == 1  # doubled from 0.3 up to the maximum, no further
    assert parts[0].next_poll_at - time.time() <= 1.5
    client.batches.cancel(batch.id)
    assert wait_for_batch(client, batch.id, timeout_s=120).status == "cancelled"


def test_a_crash_between_the_providers_create_and_our_bookkeeping_makes_no_second_provider_batch(
    db_kind: str, provider: RunningStack, tmp_path: Path
) -> None:
    """The core dies right after the provider accepted the batch, before its id was stored; the
    restarted scheduler finds that batch by its token and follows it instead of creating one."""
    with native_stack(
        db_kind, tmp_path, provider, BATCHGATE_CRASH_AT="scheduler.native.after_create"
    ) as crashing:
        client = crashing.client()
        inputs = records(2, "native-crash")
        batch = client.batches.create(
            input_file_id=upload(client, inputs).id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert wait_for_exit(crashing, "core") == CRASH_EXIT_CODE
        (part,) = parts_of(crashing, batch.id)
        assert part.provider_file_id and part.provider_batch_id is None  # the crash came before the store
        tagged = [b for b in provider_batches(provider) if b.metadata["batchgate_token"] == part.token]
        assert len(tagged) == 1  # ... and after the provider accepted it

        restart_core(crashing)
        done = wait_for_batch(client, batch.id)
        assert done.status == "completed" and done.request_counts.completed == 2
        lines = read_jsonl(client.files.content(done.output_file_id).content)
        assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in inputs]
        (part,) = parts_of(crashing, batch.id)
        assert part.provider_batch_id == tagged[0].id
        assert [b.id for b in provider_batches(provider) if b.metadata["batchgate_token"] == part.token] == [
            tagged[0].id
        ]


def test_a_batch_the_provider_refuses_fails_with_the_providers_error(stack: RunningStack) -> None:
    client = stack.client()
    inputs = records(2, "native-broken", model="native-broken")
    batch = client.batches.create(
        input_file_id=upload(client, inputs).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = wait_for_batch(client, batch.id)
    assert done.status == "failed" and done.failed_at
    assert done.request_counts.failed == 2 and done.output_file_id is None
    (error,) = done.errors.data
    assert error.code == "provider_batch_failed" and "no_valid_records" in error.message
    lines = read_jsonl(client.files.content(done.error_file_id).content)
    assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in inputs]
    assert {line["error"]["code"] for line in lines} == {"provider_batch_failed"}


def test_progress_moves_while_the_provider_runs_the_batch(stack: RunningStack) -> None:
    client = stack.client()
    inputs = records(2, "native-live-fast") + records(1, "native-live-slow", x_sim={"delay_ms": 6_000})
    batch = client.batches.create(
        input_file_id=upload(client, inputs).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while (live := client.batches.retrieve(batch.id)).request_counts.completed < 2:
        assert live.status == "in_progress" and time.monotonic() < deadline, live
        time.sleep(0.1)
    assert live.status == "in_progress" and live.request_counts.completed == 2  # the provider's count
    assert parts_of(stack, batch.id)[0].imported is False
    done = wait_for_batch(client, batch.id)
    assert done.status == "completed" and done.request_counts.completed == 3
    assert done.request_counts.failed == 0


def test_a_dry_run_of_a_native_batch_checks_and_estimates_at_the_batch_price_storing_nothing(
    stack: RunningStack, provider: RunningStack
) -> None:
    client = stack.client()
    file_id = upload(client, records(3, "native-dry")).id
    before = len(provider_batches(provider)), len(db_rows(stack.database_url, native_batches.select()))
    headers = {"Authorization": f"Bearer {stack.key}"}
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    dry = httpx.post(f"{stack.base_url}/batches", json={**body, "dry_run": True}, headers=headers, timeout=30)
    assert dry.status_code == 200, dry.text
    answer = dry.json()
    assert answer["dry_run"] is True and answer["execution"] == "native"
    estimate = answer["estimate"]
    assert estimate["input_tokens"] > 0
    assert estimate["cost_min"] == pytest.approx(
        estimate["input_tokens"] * PRICE["input_per_mtok"] / 1e6 * (1 - NATIVE_DISCOUNT)
    )
    executed = httpx.post(
        f"{stack.base_url}/batches",
        json={**body, "dry_run": True, "execution": "execute"},
        headers=headers,
        timeout=30,
    ).json()
    assert executed["execution"] == "execute"
    # executed: the tier's discount (0 in this stack), so twice the native estimate
    assert executed["estimate"]["cost_min"] == pytest.approx(estimate["cost_min"] / (1 - NATIVE_DISCOUNT))

    refused = httpx.post(
        f"{stack.base_url}/batches",
        json={
            **body,
            "input_file_id": upload(client, records(1, "native-dry-no", model="gpt-4o-mini")).id,
            "dry_run": True,
            "execution": "native",
        },
        headers=headers,
        timeout=30,
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "native_unsupported"
    # nothing stored, nothing sent to the provider
    assert not [b for b in client.batches.list(limit=100) if b.input_file_id == file_id]
    after = len(provider_batches(provider)), len(db_rows(stack.database_url, native_batches.select()))
    assert after == before


def test_a_retry_of_a_native_batch_is_native_unless_pointed_at_another_model(stack: RunningStack) -> None:
    client = stack.client()
    source = client.batches.create(
        input_file_id=upload(client, records(2, "native-retry", model="native-broken")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    assert wait_for_batch(client, source.id).status == "failed"
    headers = {"Authorization": f"Bearer {stack.key}"}
    again = httpx.post(f"{stack.base_url}/batches/{source.id}/retry", json={}, headers=headers, timeout=60)
    assert again.status_code == 200, again.text
    assert again.json()["execution"] == "native" and again.json()["retry_of"] == source.id
    assert wait_for_batch(client, again.json()["id"]).status == "failed"  # refused by the provider again
    assert len(parts_of(stack, again.json()["id"])) == 1  # went through the provider's batch API

    elsewhere = httpx.post(
        f"{stack.base_url}/batches/{source.id}/retry",
        json={"model": "gpt-4o-mini"},
        headers=headers,
        timeout=60,
    )
    assert elsewhere.status_code == 200, elsewhere.text
    assert elsewhere.json()["execution"] == "execute"
    done = wait_for_batch(client, elsewhere.json()["id"])
    assert done.status == "completed" and done.request_counts.completed == 2
    assert parts_of(stack, done.id) == []


def test_a_message_batch_of_a_native_model_runs_on_our_executors(stack: RunningStack) -> None:
    anthropic_client = sdk(stack)
    batch = anthropic_client.messages.batches.create(
        requests=[{"custom_id": "mb-native", "params": params("native-mini", "a message batch item")}]
    )
    done = wait_ended(anthropic_client, batch.id)
    # called request by request (the provider stack answers no synchronous chat call: errored)
    assert done.request_counts.succeeded + done.request_counts.errored == 1
    (row,) = db_rows(stack.database_url, batches.select().where(batches.c.id == batch.id))
    assert row.execution == "execute" and parts_of(stack, batch.id) == []


def refused_natively(stack: RunningStack, file_id: str, extra: dict[str, Any], words: str) -> None:
    """A create and a dry run of `file_id` (with `extra` fields) are 400 `native_unsupported`
    saying `words`, and no batch of it exists."""
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    for dry_run in (False, True):
        answer = httpx.post(
            f"{stack.base_url}/batches",
            json={**body, **extra, "dry_run": dry_run},
            headers={"Authorization": f"Bearer {stack.key}"},
            timeout=30,
        )
        assert answer.status_code == 400, (dry_run, answer.text)
        error = answer.json()["error"]
        assert (error["code"], error["param"]) == ("native_unsupported", "execution"), error
        assert words in error["message"]
    assert not [b for b in stack.client().batches.list(limit=100) if b.input_file_id == file_id]


@pytest.mark.parametrize("order", ["native-model-first", "other-model-first"])
def test_native_execution_of_records_naming_two_models_is_refused_in_either_order(
    stack: RunningStack, order: str
) -> None:
    """400 `native_unsupported` whichever model comes first, for a create and a dry run alike;
    an unknown `execution` is named in plain words."""
    two = [*records(1, f"native-two-{order}"), *records(1, f"native-two-{order}-b", model="gpt-4o-mini")]
    if order == "other-model-first":
        two.reverse()
    file_id = upload(stack.client(), two).id
    headers = {"Authorization": f"Bearer {stack.key}"}
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    refused_natively(stack, file_id, {"execution": "native"}, "more than one")
    bogus = httpx.post(f"{stack.base_url}/batches", json={**body, "execution": "bogus"}, headers=headers)
    assert bogus.json()["error"]["message"] == "'execution' must be one of ['execute', 'native']."


@pytest.mark.parametrize(("model", "execution"), [("native-mini", ""), ("gpt-4o", "native")])
def test_records_that_call_tools_never_go_native(stack: RunningStack, model: str, execution: str) -> None:
    """They went, by the model's default or when asked: the provider got each record's
    `batchgate` section, the tool server's authorization in it, and ran no tool. 400
    `native_unsupported` for a create and a dry run alike; executed, the same records run."""
    tool_record = records(1, f"native-tools-{model}", model=model)[0]
    tool_record["body"]["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    tool_record["body"]["batchgate"] = {
        "tool_config": {"url": "http://127.0.0.1:9/tools", "authorization": "Bearer never-sent"}
    }
    plain = records(1, f"native-plain-{model}", model=model)
    file_id = upload(stack.client(), [*plain, tool_record]).id
    refused_natively(stack, file_id, {"execution": execution} if execution else {}, "tool_config")
    executed = stack.client().batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"execution": "execute"},
    )
    assert executed.rejected_count == 0


def test_a_recurring_native_batchs_create_answer_shows_how_its_runs_execute(stack: RunningStack) -> None:
    """The template's create answer holds the fields every run will have: `execution` included."""
    headers = {"Authorization": f"Bearer {stack.key}"}
    answer = httpx.post(
        f"{stack.base_url}/batches",
        json={
            "input_file_id": upload(stack.client(), records(1, "native-cron")).id,
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "cron": "0 0 1 1 *",  # no run while the tests go on
            "execution": "native",
        },
        headers=headers,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    template = answer.json()
    try:
        assert template["object"] == "batch_template" and template["execution"] == "native", template
    finally:
        httpx.delete(f"{stack.base_url}/batch_templates/{template['id']}", headers=headers, timeout=30)

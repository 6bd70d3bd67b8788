"""Recurring batches end to end: cron templates created with the openai SDK through Envoy,
runs spawned by the scheduler as the injected clock (`BATCHGATE_TEMPLATE_CLOCK_FILE`) reaches
each due time, and the template API and CLI around them.

The clock only drives template scheduling; runs themselves execute in real time.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from batchgate.services.common import cron
from tests.recurring_support import (
    ENDPOINT,
    QUIET_S,
    Clock,
    act,
    runs,
    schedule,
    template,
    wait_for_runs,
)
from tests.support import (
    RunningStack,
    add_project,
    chat_records,
    db_rows,
    eventually,
    free_port_run,
    fresh_database,
    run_cli,
    running_stack,
    upload,
    wait_for_batch,
)

PARIS = "Europe/Paris"


@pytest.fixture(scope="module")
def clocked(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningStack, Clock]]:
    tmp = tmp_path_factory.mktemp(f"recurring-{db_kind}")
    clock = Clock(tmp / "clock")
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            projects=("default", "other"),
            BATCHGATE_TEMPLATE_CLOCK_FILE=str(clock.path),
            BATCHGATE_INGEST_SWEEP_INTERVAL_S="0.5",  # expired input files are swept at once
            BATCHGATE_METRICS_PORT=str(free_port_run(2)),  # the embedded process on P, executor 0 on P+1
        ) as stack,
    ):
        yield stack, clock


def new_project(stack: RunningStack, budget_usd: float | None = None) -> Any:
    name = f"tpl-{uuid.uuid4().hex[:8]}"
    add_project(stack, name, budget_usd=budget_usd)
    return stack.client(name)


def test_a_cron_create_is_a_scheduled_template_and_each_due_time_makes_one_run(
    clocked: tuple[RunningStack, Clock],
) -> None:
    stack, clock = clocked
    client = new_project(stack)
    source = upload(client, chat_records(2, prefix="nightly"))
    hook = "http://127.0.0.1:9/nightly"  # loopback is allowed in test stacks; nobody listens
    created = schedule(
        client,
        source.id,
        "0 2 * * *",
        PARIS,
        metadata={"team": "nightly"},
        priority="expedited",
        webhook_url=hook,
        output_expires_after={"anchor": "created_at", "seconds": 7200},
    )
    first_due = cron.next_time("0 2 * * *", PARIS, clock.now())
    assert created["id"].startswith("btpl_") and created["object"] == "batch_template"
    assert created["status"] == "scheduled" and created["next_run_at"] == first_due
    assert (created["cron"], created["cron_timezone"]) == ("0 2 * * *", PARIS)
    assert created["input_file_id"] == source.id and created["metadata"] == {"team": "nightly"}
    assert created["priority"] == "expedited" and created["request_counts"]["total"] == 0
    assert created["webhook_url"] == hook
    assert client.batches.list().data == []  # a template is not a batch, and makes none yet

    clock.set(first_due)
    (run,) = wait_for_runs(client, created["id"], 1)
    assert run.to_dict()["template_id"] == created["id"]
    assert (run.input_file_id, run.endpoint, run.metadata) == (source.id, ENDPOINT, {"team": "nightly"})
    assert run.to_dict()["priority"] == "expedited" and run.to_dict()["webhook_url"] == hook
    done = wait_for_batch(client, run.id)
    assert done.status == "completed" and done.request_counts.completed == 2
    output = client.files.retrieve(done.output_file_id)
    assert output.expires_at == output.created_at + 7200  # the template's output_expires_after

    shown = template(client, created["id"])
    assert shown["last_run_at"] == first_due and shown["last_error"] is None
    assert shown["next_run_at"] == cron.next_time("0 2 * * *", PARIS, first_due) == first_due + 86400
    assert [r["id"] for r in shown["recent_runs"]] == [run.id]

    time.sleep(QUIET_S)  # ticks go on at the same clock: no second run of that due time
    assert len(runs(client, created["id"])) == 1
    clock.set(shown["next_run_at"] + 30)
    second, first = wait_for_runs(client, created["id"], 2)
    assert first.id == run.id and second.id != run.id
    act(client, created["id"], "resume")  # resuming a scheduled template changes nothing
    assert client.delete(f"/batch_templates/{created['id']}", cast_to=object)["deleted"] is True


def test_a_daily_time_in_the_spring_gap_runs_at_the_end_of_the_gap(
    clocked: tuple[RunningStack, Clock],
) -> None:
    stack, clock = clocked
    client = new_project(stack)
    clock.set(datetime(2026, 3, 28, 12, tzinfo=UTC).timestamp())  # Paris skips 02:00-03:00 on the 29th
    created = schedule(client, upload(client, chat_records(1, prefix="dst")).id, "30 2 * * *", PARIS)
    assert created["next_run_at"] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp()  # 03:00 CEST
    clock.set(created["next_run_at"])
    wait_for_runs(client, created["id"], 1)
    after = template(client, created["id"])["next_run_at"]
    assert after == datetime(2026, 3, 30, 0, 30, tzinfo=UTC).timestamp()  # 02:30 CEST again
    act(client, created["id"], "pause")


def test_due_times_missed_while_no_tick_came_make_one_catch_up_run(
    clocked: tuple[RunningStack, Clock],
) -> None:
    stack, clock = clocked
    client = new_project(stack)
    created = schedule(client, upload(client, chat_records(1, prefix="hourly")).id, "0 * * * *")
    # Five hours pass without a tick (as while every scheduler is down): one run, not five.
    back_at = created["next_run_at"] + 5 * 3600 + 600
    clock.set(back_at)
    wait_for_runs(client, created["id"], 1)
    time.sleep(QUIET_S)
    assert len(runs(client, created["id"])) == 1
    shown = template(client, created["id"])
    assert shown["last_run_at"] == created["next_run_at"]  # the oldest missed time, served late
    assert shown["next_run_at"] == cron.next_time("0 * * * *", "UTC", back_at) > back_at
    act(client, created["id"], "pause")


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        ({"cron": "0 2 * *"}, 400, "invalid_cron", "cron"),
        ({"cron": ""}, 400, "invalid_cron", "cron"),  # given, so not a one-off batch
        ({"cron_timezone": "Europe/Paris"}, 400, "missing_parameter", "cron"),
        ({"cron": "0 2 * * * *"}, 400, "invalid_cron", "cron"),
        ({"cron": "0 2 31 2 *"}, 400, "invalid_cron", "cron"),
        ({"cron": "99 2 * * *"}, 400, "invalid_cron", "cron"),
        ({"cron": "0 2 * * *", "cron_timezone": "Moon/Base"}, 400, "invalid_cron_timezone", "cron_timezone"),
        ({"cron": 5}, 400, "invalid_type", "cron"),
        ({"cron": "0 2 * * *", "dry_run": True}, 400, "invalid_value", "dry_run"),
        ({"cron": "0 2 * * *", "endpoint": "/v1/nope"}, 400, "invalid_endpoint", "endpoint"),
        ({"cron": "0 2 * * *", "input_file_id": "file-unknown"}, 404, "not_found", "input_file_id"),
        (
            {"cron": "0 2 * * *", "input_file_id": None, "requests": [{"body": {"model": "gpt-4o-mini"}}]},
            400,
            "missing_input",
            "input_file_id",
        ),
    ],
)
def test_a_bad_template_is_refused_naming_the_problem_and_stores_nothing(
    clocked: tuple[RunningStack, Clock], body: dict[str, Any], status: int, code: str, param: str
) -> None:
    stack, _ = clocked
    client = new_project(stack)
    source = upload(client, chat_records(1, prefix="bad"))
    request = {"input_file_id": source.id, "endpoint": ENDPOINT, "completion_window": "24h", **body}
    with pytest.raises(openai.APIStatusError) as caught:
        client.post("/batches", body=request, cast_to=object)
    assert caught.value.status_code == status
    error = caught.value.body
    assert (error["code"], error["param"]) == (code, param), error
    assert client.get("/batch_templates", cast_to=object)["data"] == []
    assert client.batches.list().data == []


def test_pause_resume_update_and_delete(clocked: tuple[RunningStack, Clock]) -> None:
    stack, clock = clocked
    client = new_project(stack)
    records = chat_records(4, prefix="slow", x_sim={"delay_ms": 1500})
    created = schedule(client, upload(client, records).id, "0 3 * * *")
    tid = created["id"]

    paused = act(client, tid, "pause")
    assert (paused["status"], paused["paused_reason"], paused["next_run_at"]) == (
        "paused",
        "paused_by_user",
        None,
    )
    assert act(client, tid, "pause") == paused  # pausing again changes nothing
    clock.set(created["next_run_at"] + 60)
    time.sleep(QUIET_S)
    assert runs(client, tid) == []  # paused: the due time passed without a run

    resumed = act(client, tid, "resume")
    assert resumed["status"] == "scheduled" and resumed["paused_reason"] is None
    assert resumed["next_run_at"] == cron.next_time("0 3 * * *", "UTC", clock.now())  # not made up

    updated = act(client, tid, cron="30 4 * * *", cron_timezone="Asia/Tokyo")
    assert (updated["cron"], updated["cron_timezone"]) == ("30 4 * * *", "Asia/Tokyo")
    assert updated["next_run_at"] == cron.next_time("30 4 * * *", "Asia/Tokyo", clock.now())
    with pytest.raises(openai.BadRequestError) as caught:
        act(client, tid, cron="30 4 * *")
    assert caught.value.body["code"] == "invalid_cron"
    with pytest.raises(openai.BadRequestError) as caught:
        act(client, tid)
    assert caught.value.body["code"] == "missing_parameter"
    with pytest.raises(openai.NotFoundError):  # another project's template is not there
        template(stack.client("other"), tid)
    assert template(client, tid)["cron"] == "30 4 * * *"

    clock.set(updated["next_run_at"])
    (run,) = wait_for_runs(client, tid, 1)
    deleted = client.delete(f"/batch_templates/{tid}", cast_to=object)
    assert deleted == {"id": tid, "object": "batch_template", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        template(client, tid)
    assert wait_for_batch(client, run.id).status == "completed"  # the running run went on
    clock.set(updated["next_run_at"] + 2 * 86400)
    time.sleep(QUIET_S)
    assert [r.id for r in runs(client, tid)] == [run.id]  # no run after the delete


def test_templates_are_listed_in_pages(clocked: tuple[RunningStack, Clock]) -> None:
    stack, _ = clocked
    client = new_project(stack)
    source = upload(client, chat_records(1, prefix="page"))
    made = [schedule(client, source.id, f"{minute} 5 * * *")["id"] for minute in range(3)]
    first = client.get("/batch_templates", cast_to=object, options={"params": {"limit": 2}})
    assert [t["id"] for t in first["data"]] == made[:0:-1] and first["has_more"] is True
    rest = client.get("/batch_templates", cast_to=object, options={"params": {"after": first["last_id"]}})
    assert [t["id"] for t in rest["data"]] == made[:1] and rest["has_more"] is False
    for query, code in (({"limit": 0}, "invalid_limit"), ({"after": "btpl_nope"}, "invalid_after")):
        with pytest.raises(openai.BadRequestError) as caught:
            client.get("/batch_templates", cast_to=object, options={"params": query})
        assert caught.value.body["code"] == code
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.list(extra_query={"template_id": "btpl_\x00"})
    assert caught.value.body["param"] == "template_id"
    assert runs(client, "btpl_unknown") == []  # runs of a deleted (or never made) template: none
    for template_id in made:
        client.delete(f"/batch_templates/{template_id}", cast_to=object)


def test_a_run_refused_for_budget_is_recorded_on_the_template(clocked: tuple[RunningStack, Clock]) -> None:
    stack, clock = clocked
    client = new_project(stack, budget_usd=0.0)  # a budget of 0 allows nothing
    created = schedule(client, upload(client, chat_records(1, prefix="broke")).id, "15 * * * *")
    clock.set(created["next_run_at"])
    shown = eventually(lambda: (t := template(client, created["id"]))["last_run_at"] and t)
    assert shown["last_error"]["code"] == "key_budget_exceeded" and "budget" in shown["last_error"]["message"]
    assert shown["status"] == "scheduled" and shown["next_run_at"] == created["next_run_at"] + 3600
    assert runs(client, created["id"]) == [] and client.batches.list().data == []
    act(client, created["id"], "pause")
    scraped = httpx.get(f"http://127.0.0.1:{stack.settings.metrics_port}/metrics", timeout=10).text
    refused = 'batchgate_template_runs_total{error_code="key_budget_exceeded",outcome="refused"'
    assert refused in scraped


def test_a_template_whose_input_file_expires_is_paused_saying_so(clocked: tuple[RunningStack, Clock]) -> None:
    """Once the sweep removed the expired file, a due run found no file and said it was deleted:
    the template is paused `input_file_expired` as the file is swept, before its next run."""
    stack, clock = clocked
    client = new_project(stack)
    source = upload(client, chat_records(1, prefix="expiring"))
    created = schedule(client, source.id, "50 * * * *")
    db_rows(
        stack.database_url, "UPDATE files SET expires_at = :t WHERE id = :f", t=time.time() - 1, f=source.id
    )
    shown = eventually(lambda: (t := template(client, created["id"]))["status"] == "paused" and t)
    assert shown["paused_reason"] == "input_file_expired" and shown["next_run_at"] is None
    assert shown["last_error"] == {
        "code": "input_file_expired",
        "message": f"The input file {source.id} has expired.",
    }
    eventually(lambda: not db_rows(stack.database_url, "SELECT id FROM files WHERE id = :f", f=source.id))
    clock.set(created["next_run_at"])  # its due time passes: still paused for the same reason, no run
    time.sleep(QUIET_S)
    assert template(client, created["id"])["paused_reason"] == "input_file_expired"
    assert runs(client, created["id"]) == []


def test_a_template_whose_input_file_is_deleted_pauses_itself_until_given_another(
    clocked: tuple[RunningStack, Clock],
) -> None:
    stack, clock = clocked
    client = new_project(stack)
    source = upload(client, chat_records(1, prefix="gone"))
    created = schedule(client, source.id, "45 * * * *")
    client.files.delete(source.id)
    clock.set(created["next_run_at"])
    shown = eventually(lambda: (t := template(client, created["id"]))["status"] == "paused" and t)
    assert shown["paused_reason"] == "input_file_deleted" and shown["next_run_at"] is None
    assert shown["last_error"]["code"] == "input_file_deleted" and source.id in shown["last_error"]["message"]
    assert runs(client, created["id"]) == []

    with pytest.raises(openai.NotFoundError):
        act(client, created["id"], input_file_id="file-unknown")
    output_file = wait_for_batch(
        client,
        client.batches.create(
            input_file_id=upload(client, chat_records(1, prefix="other")).id,
            endpoint=ENDPOINT,
            completion_window="24h",
        ).id,
    ).output_file_id
    with pytest.raises(openai.BadRequestError) as caught:
        act(client, created["id"], input_file_id=output_file)  # not an input
    assert caught.value.body["code"] == "invalid_input_file"

    replacement = upload(client, chat_records(2, prefix="again"))
    changed = act(client, created["id"], input_file_id=replacement.id)
    assert changed["input_file_id"] == replacement.id and changed["status"] == "paused"
    resumed = act(client, created["id"], "resume")
    clock.set(resumed["next_run_at"])
    (run,) = wait_for_runs(client, created["id"], 1)
    assert run.input_file_id == replacement.id
    assert wait_for_batch(client, run.id).request_counts.completed == 2
    act(client, created["id"], "pause")


def test_a_template_whose_key_is_revoked_pauses_itself(clocked: tuple[RunningStack, Clock]) -> None:
    stack, clock = clocked
    name = f"tplkey-{uuid.uuid4().hex[:8]}"
    add_project(stack, name)
    created = schedule(stack.client(name), upload(stack.client(name), chat_records(1)).id, "50 * * * *")
    (creator,) = db_rows(
        stack.database_url, "SELECT api_key_id FROM batch_templates WHERE id = :t", t=created["id"]
    )
    add_project(stack, name)  # a second key of the project, to read the template with
    db_rows(stack.database_url, "UPDATE api_keys SET revoked_at = 1 WHERE id = :k", k=creator[0])
    clock.set(created["next_run_at"])
    shown = eventually(lambda: (t := template(stack.client(name), created["id"]))["status"] == "paused" and t)
    assert shown["paused_reason"] == "api_key_revoked" and creator[0] in shown["last_error"]["message"]
    assert runs(stack.client(name), created["id"]) == []


def test_an_idempotency_key_is_refused_with_cron(clocked: tuple[RunningStack, Clock]) -> None:
    stack, _ = clocked
    client = new_project(stack)
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=upload(client, chat_records(1)).id,
            endpoint=ENDPOINT,
            completion_window="24h",
            extra_body={"cron": "0 2 * * *"},
            extra_headers={"Idempotency-Key": "nightly"},
        )
    assert caught.value.body["code"] == "invalid_idempotency_key"
    assert client.get("/batch_templates", cast_to=object)["data"] == []


def test_the_cli_drives_templates(clocked: tuple[RunningStack, Clock], tmp_path: Path) -> None:
    stack, _ = clocked
    name = f"tplcli-{uuid.uuid4().hex[:8]}"
    add_project(stack, name)
    env = {"BATCHGATE_BASE_URL": stack.base_url, "BATCHGATE_API_KEY": stack.keys[name]}
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in chat_records(1, prefix="cli")) + "\n")

    made = run_cli(
        "batches", "create", "--input-file", str(source), "--endpoint", ENDPOINT,
        "--cron", "0 2 * * *", "--cron-timezone", PARIS, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    tid = made.stdout.strip()
    assert tid.startswith("btpl_") and "scheduled: next run at" in made.stderr
    listed = run_cli("templates", "list", env=env)
    assert listed.returncode == 0 and tid in listed.stdout and "0 2 * * * (Europe/Paris)" in listed.stdout
    paused = run_cli("templates", "pause", tid, env=env)
    assert paused.returncode == 0 and "paused (paused_by_user)" in paused.stdout
    assert run_cli("templates", "resume", tid, env=env).returncode == 0
    updated = run_cli("templates", "update", tid, "--cron", "5 4 * * *", "--json", env=env)
    assert updated.returncode == 0 and '"cron": "5 4 * * *"' in updated.stdout
    bad = run_cli("templates", "update", tid, "--cron", "5 4 * *", env=env)
    assert bad.returncode == 2 and "5 fields" in bad.stderr
    shown = run_cli("templates", "get", tid, env=env)
    assert shown.returncode == 0 and "5 4 * * * (Europe/Paris)" in shown.stdout
    assert run_cli("templates", "delete", tid, env=env).returncode == 0
    assert run_cli("templates", "get", tid, env=env).returncode == 3


def test_a_template_keeps_execution_for_its_runs(clocked: tuple[RunningStack, Clock]) -> None:
    """`execution` is part of the stored create request: an unknown value is refused at once; a
    run of a template asking `native` of a model without a batch API is refused as that create
    would be, recorded on the template, and makes no batch."""
    stack, clock = clocked
    client = new_project(stack)
    file_id = upload(client, chat_records(1, prefix="tpl-native")).id
    with pytest.raises(openai.BadRequestError) as bad:
        schedule(client, file_id, "45 * * * *", execution="sometimes")
    assert bad.value.code == "invalid_execution"
    created = schedule(client, file_id, "45 * * * *", execution="native")
    clock.set(created["next_run_at"])
    shown = eventually(lambda: (t := template(client, created["id"]))["last_run_at"] and t)
    assert shown["last_error"]["code"] == "native_unsupported", shown
    assert runs(client, created["id"]) == [] and client.batches.list().data == []
    executed = schedule(client, file_id, "50 * * * *", execution="execute")
    clock.set(executed["next_run_at"])
    (run,) = wait_for_runs(client, executed["id"], 1)
    assert run.to_dict()["execution"] == "execute"


def _creator_key(stack: RunningStack, template_id: str) -> str:
    (row,) = db_rows(
        stack.database_url, "SELECT api_key_id FROM batch_templates WHERE id = :t", t=template_id
    )
    return str(row[0])


def test_a_run_follows_its_creator_keys_policy(clocked: tuple[RunningStack, Clock]) -> None:
    """A run is a create by the template's key: the key's policy (issue 17) applies to it."""
    stack, clock = clocked
    client = new_project(stack)
    created = schedule(client, upload(client, chat_records(1, prefix="policed")).id, "20 * * * *")
    key_id = _creator_key(stack, created["id"])
    done = run_cli("keys", "set-policy", key_id, "--allow-models", "gpt-4o", env=stack.env)
    assert done.returncode == 0, done.stderr
    clock.set(created["next_run_at"])
    shown = eventually(lambda: (t := template(client, created["id"]))["last_run_at"] and t)
    assert shown["last_error"]["code"] == "no_valid_records" and shown["status"] == "scheduled"
    assert runs(client, created["id"]) == []
    # The full list of rejections is stored, and the template names it (it was named nowhere).
    rejected = client.files.content(shown["last_error"]["rejected_records_file_id"]).text
    assert '"code":"model_not_allowed"' in rejected.replace(" ", "")
    act(client, created["id"], "pause")


@pytest.mark.parametrize("refusal", ["scope", "open_batches"])
def test_a_run_its_key_may_not_make_now_is_refused_and_the_template_moves_on(
    clocked: tuple[RunningStack, Clock], refusal: str
) -> None:
    """A key without `batches:write` (403) made runs anyway; one at its open-batch limit (429)
    was retried every second, the due time never served, the run made late."""
    stack, clock = clocked
    client = new_project(stack)
    created = schedule(client, upload(client, chat_records(1, prefix=f"refused-{refusal}")).id, "25 * * * *")
    key_id = _creator_key(stack, created["id"])
    if refusal == "scope":
        policy = ("--scopes", "batches:read,files:read")
        expected = "insufficient_scope"
    else:
        slow = chat_records(1, prefix="open", x_sim={"delay_ms": 60_000})
        open_batch = client.batches.create(
            input_file_id=upload(client, slow).id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        policy = ("--max-concurrent", "1")
        expected = "too_many_open_batches"
    done = run_cli("keys", "set-policy", key_id, *policy, env=stack.env)
    assert done.returncode == 0, done.stderr
    clock.set(created["next_run_at"])  # a run reads its key afresh from the database
    shown = eventually(lambda: (t := template(client, created["id"]))["last_run_at"] and t)
    assert shown["last_error"]["code"] == expected and shown["status"] == "scheduled"
    assert shown["next_run_at"] > created["next_run_at"]  # on to its next time
    if refusal == "open_batches":
        client.batches.cancel(open_batch.id)
    assert runs(client, created["id"]) == []


def test_a_template_whose_key_expired_pauses_itself(clocked: tuple[RunningStack, Clock]) -> None:
    stack, clock = clocked
    name = f"tplexp-{uuid.uuid4().hex[:8]}"
    add_project(stack, name)
    created = schedule(stack.client(name), upload(stack.client(name), chat_records(1)).id, "40 * * * *")
    creator = _creator_key(stack, created["id"])
    add_project(stack, name)  # a second key of the project, to read the template with
    db_rows(stack.database_url, "UPDATE api_keys SET expires_at = 1 WHERE id = :k", k=creator)
    clock.set(created["next_run_at"])
    shown = eventually(lambda: (t := template(stack.client(name), created["id"]))["status"] == "paused" and t)
    assert shown["paused_reason"] == "api_key_revoked" and "has expired" in shown["last_error"]["message"]
    assert runs(stack.client(name), created["id"]) == []

"""The `batchgate` client verbs end to end: REST through Envoy, progress in a log, exit codes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from batchgate.exit_codes import ExitCode
from tests.support import (
    RunningStack,
    add_project,
    chat_records,
    free_port,
    jsonl,
    read_jsonl,
    run_cli,
    upload,
    wait_for_batch,
)


def _client_env(stack: RunningStack, key: str | None = None) -> dict[str, str]:
    return {"BATCHGATE_BASE_URL": stack.base_url, "BATCHGATE_API_KEY": key or stack.key}


def test_create_wait_shows_progress_in_a_log_and_downloads_the_files(
    shared_stack: RunningStack, tmp_path: Path
) -> None:
    records = chat_records(30, prefix="cli-wait", x_sim={"delay_ms": 100})
    duplicate = dict(records[0])
    (tmp_path / "in.jsonl").write_bytes(jsonl([*records, duplicate]))
    out_dir, rejections = tmp_path / "out", tmp_path / "rejected.jsonl"

    run = run_cli(
        "batches", "create", "--input-file", str(tmp_path / "in.jsonl"),
        "--endpoint", "/v1/chat/completions", "--wait", "-o", str(out_dir),
        "--metadata", "team=cli", "--metadata", "run=1", "--priority", "expedited",
        "--rejections-out", str(rejections), "--poll-interval", "0.2",
        env=_client_env(shared_stack),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    batch_id = run.stdout.split()[0]
    assert batch_id.startswith("batch_")

    # stderr is a pipe here: plain lines, no carriage returns or escape codes.
    assert "\r" not in run.stderr and "\x1b" not in run.stderr
    assert "rejected line 31 [cli-wait-0]: duplicate_custom_id" in run.stderr
    progress = [line for line in run.stderr.splitlines() if re.match(r"\d\d:\d\d:\d\d batch_", line)]
    assert progress, run.stderr
    assert re.search(r"completed: 31/31 \(100%\)  30 completed  1 failed  [\d.]+/s  ETA 0s$", progress[-1])
    assert all(re.search(r" \d+/31 \(\d+%\)  \d+ completed  \d+ failed  ", line) for line in progress)

    output = read_jsonl((out_dir / f"{batch_id}_output.jsonl").read_text())
    assert [line["custom_id"] for line in output] == [r["custom_id"] for r in records]
    errors = read_jsonl((out_dir / f"{batch_id}_errors.jsonl").read_text())
    assert [e["error"]["code"] for e in errors] == ["duplicate_custom_id"]
    assert [r["line"] for r in read_jsonl(rejections.read_text())] == [31]

    batch = shared_stack.client().batches.retrieve(batch_id)
    assert batch.metadata == {"team": "cli", "run": "1"}
    assert batch.model_extra["priority"] == "expedited"


def test_results_and_file_verbs(shared_stack: RunningStack, tmp_path: Path) -> None:
    env = _client_env(shared_stack)
    records = chat_records(5, prefix="cli-files")
    (tmp_path / "in.jsonl").write_bytes(jsonl(records))

    upload = run_cli("files", "upload", str(tmp_path / "in.jsonl"), "--json", env=env)
    assert upload.returncode == 0, upload.stderr
    file = json.loads(upload.stdout)
    assert file["purpose"] == "batch" and file["bytes"] == (tmp_path / "in.jsonl").stat().st_size

    listing = run_cli("files", "list", "--purpose", "batch", env=env)
    assert listing.returncode == 0 and file["id"] in listing.stdout
    shown = run_cli("files", "get", file["id"], env=env)
    assert shown.returncode == 0 and "in.jsonl" in shown.stdout
    download = run_cli("files", "download", file["id"], env=env)
    assert download.returncode == 0 and download.stdout.encode() == (tmp_path / "in.jsonl").read_bytes()

    client = shared_stack.client()
    batch = client.batches.create(
        input_file_id=file["id"], endpoint="/v1/chat/completions", completion_window="24h"
    )
    got = run_cli("batches", "get", batch.id, "--wait", "-o", str(tmp_path), "--json", env=env)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["status"] == "completed"
    assert (tmp_path / f"{batch.id}_output.jsonl").exists()

    results = run_cli("batches", "results", batch.id, "-o", str(tmp_path / "r.jsonl"), env=env)
    assert results.returncode == 0, results.stderr
    lines = read_jsonl((tmp_path / "r.jsonl").read_text())
    assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in records]
    failed_only = run_cli("batches", "results", batch.id, "--state", "failed", env=env)
    assert failed_only.returncode == 0 and failed_only.stdout == ""

    listed = run_cli("batches", "list", "--limit", "100", "--json", env=env)
    assert batch.id in [b["id"] for b in json.loads(listed.stdout)["data"]]

    deleted = run_cli("files", "delete", file["id"], env=env)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"deleted {file['id']}"
    gone = run_cli("files", "get", file["id"], env=env)
    assert gone.returncode == ExitCode.NOT_FOUND
    assert "404 not_found" in gone.stderr


def test_usage_verb_sums_a_batch_like_the_api(shared_stack: RunningStack) -> None:
    env = _client_env(shared_stack)
    client = shared_stack.client()
    batch = client.batches.create(
        input_file_id=upload(client, chat_records(3, prefix="cli-usage")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    batch = wait_for_batch(client, batch.id)
    as_json = run_cli("usage", "--batch-id", batch.id, "--group-by", "model", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    (group,) = json.loads(as_json.stdout)["data"]
    assert (group["model"], group["requests"], group["total_tokens"]) == (
        "gpt-4o-mini",
        3,
        batch.usage.total_tokens,
    )
    table = run_cli("usage", "--batch-id", batch.id, "--group-by", "model", env=env)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["MODEL", "REQUESTS", "INPUT", "OUTPUT", "TOTAL", "COST", "USD"]
    assert row.split()[:5] == [
        "gpt-4o-mini",
        "3",
        str(batch.usage.input_tokens),
        str(batch.usage.output_tokens),
        str(batch.usage.total_tokens),
    ]
    unknown = run_cli("usage", "--batch-id", "batch_nothing", env=env)
    assert unknown.returncode == ExitCode.NOT_FOUND, unknown.stderr
    bad = run_cli("usage", "--group-by", "colour", env=env)
    assert bad.returncode == ExitCode.INVALID, bad.stderr


def test_usage_of_a_project_that_used_nothing_is_one_group_of_zeros(shared_stack: RunningStack) -> None:
    """Without `group_by` the answer holds one group with the totals (README "Usage and cost"):
    a project with no usage got an empty list, and `batchgate usage` an empty table."""
    project = f"unused-{time.time_ns()}"
    add_project(shared_stack, project)
    env = _client_env(shared_stack, key=shared_stack.keys[project])
    as_json = run_cli("usage", "--json", env=env)
    assert as_json.returncode == ExitCode.OK, as_json.stderr
    assert json.loads(as_json.stdout) == {
        "object": "list",
        "data": [
            {
                "object": "usage.group",
                "batch_id": None,
                "model": None,
                "api_key_id": None,
                "requests": 0,
                "input_tokens": 0,
                "cached_tokens": 0,
                "output_tokens": 0,
                "reasoning_tokens": 0,
                "total_tokens": 0,
                "cost": {"currency": "usd", "amount": 0},
                "rejected_requests": 0,
            }
        ],
    }
    table = run_cli("usage", env=env)
    assert table.returncode == ExitCode.OK, table.stderr
    assert [line.split() for line in table.stdout.splitlines()] == [
        ["REQUESTS", "INPUT", "OUTPUT", "TOTAL", "COST", "USD"],
        ["0", "0", "0", "0", "0.000000"],
    ]
    grouped = run_cli("usage", "--group-by", "model", "--json", env=env)  # no group: none listed
    assert grouped.returncode == ExitCode.OK and json.loads(grouped.stdout)["data"] == [], grouped.stderr


def test_exit_codes(shared_stack: RunningStack, tmp_path: Path) -> None:
    env = _client_env(shared_stack)
    client = shared_stack.client()
    (tmp_path / "bad.jsonl").write_text('not json\n{"custom_id": "x"}\n')
    (tmp_path / "ok.jsonl").write_bytes(jsonl(chat_records(1, prefix="cli-codes")))
    create = ("batches", "create", "--endpoint", "/v1/chat/completions", "--input-file")

    no_valid = run_cli(*create, str(tmp_path / "bad.jsonl"), env=env)
    assert no_valid.returncode == ExitCode.INVALID
    assert "rejected line 1: invalid_json_line" in no_valid.stderr
    assert "no_valid_records" in no_valid.stderr

    batch = client.batches.create(
        input_file_id=upload(client, chat_records(1, prefix="cli-codes")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    finished = wait_for_batch(client, batch.id)
    cases = [
        (("batches", "get", "batch_doesnotexist"), env, ExitCode.NOT_FOUND),
        (("batches", "cancel", finished.id), env, ExitCode.CONFLICT),
        ((*create, str(tmp_path / "missing.jsonl")), env, ExitCode.INVALID),
        ((*create, str(tmp_path / "ok.jsonl"), "--metadata", "novalue"), env, ExitCode.INVALID),
        ((*create, str(tmp_path / "ok.jsonl"), "--priority", "urgent"), env, ExitCode.INVALID),
        (("batches", "create", "--endpoint", "/v1/chat/completions"), env, ExitCode.INVALID),
        (("batches", "list"), _client_env(shared_stack, key="bg-wrong"), ExitCode.OTHER),
        (("batches", "list"), {"BATCHGATE_BASE_URL": shared_stack.base_url}, ExitCode.INVALID),
        (("batches", "list", "--base-url", f"http://127.0.0.1:{free_port()}/v1"), env, ExitCode.OTHER),
        (("batches", "get", finished.id), env, ExitCode.OK),
    ]
    for args, case_env, expected in cases:
        run = run_cli(*args, env=case_env)
        assert run.returncode == expected, (args, run.stdout, run.stderr)
        if expected != ExitCode.OK:
            assert run.stderr.strip(), args


def _files_named(stack: RunningStack, name: str) -> list[str]:
    return [f.id for f in stack.client().files.list(purpose="batch") if f.filename == name]


def _rejected_lines(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.strip().startswith("rejected line")]


def test_create_again_with_the_same_idempotency_key_answers_the_first_batch(
    shared_stack: RunningStack, tmp_path: Path
) -> None:
    """The second run uploaded the file again: another input_file_id, so the server saw another
    request under the key (422 idempotency_key_reused) and the second upload stayed behind."""
    env = _client_env(shared_stack)
    name = f"cli-idem-{time.time_ns()}.jsonl"
    (tmp_path / name).write_bytes(jsonl(chat_records(2, prefix=name)))
    create = ("batches", "create", "--input-file", str(tmp_path / name), "--endpoint", "/v1/chat/completions")
    key = ("--idempotency-key", f"key-{name}")

    first = run_cli(*create, *key, env=env)
    assert first.returncode == 0, first.stderr
    again = run_cli(*create, *key, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[0] == first.stdout.split()[0]
    assert len(_files_named(shared_stack, name)) == 1  # the first upload only

    # The same key with another request is still refused, and leaves no upload behind.
    other = run_cli(*create, *key, "--metadata", "run=2", env=env)
    assert other.returncode == ExitCode.INVALID and "idempotency_key_reused" in other.stderr
    assert len(_files_named(shared_stack, name)) == 1
    # A create the server refuses deletes the upload it made.
    refused = tmp_path / f"cli-refused-{time.time_ns()}.jsonl"
    refused.write_text("not json\n")
    no_valid = run_cli(*create[:3], str(refused), *create[4:], "--idempotency-key", refused.name, env=env)
    assert no_valid.returncode == ExitCode.INVALID and "no_valid_records" in no_valid.stderr
    assert _files_named(shared_stack, refused.name) == []


def test_dry_run_of_a_file_with_bytes_that_are_not_utf8_rejects_that_line(
    shared_stack: RunningStack, tmp_path: Path
) -> None:
    """The CLI decoded the file itself and died with a UnicodeDecodeError traceback."""
    good = json.dumps(chat_records(1, prefix="cli-latin")[0]).encode()
    path = tmp_path / f"latin-{time.time_ns()}.jsonl"
    path.write_bytes(good + b'\n{"custom_id":"\xff"}\n')
    run = run_cli("batches", "create", "--input-file", str(path), "--endpoint", "/v1/chat/completions",
                  "--dry-run", env=_client_env(shared_stack))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    (rejected,) = _rejected_lines(run.stderr)
    assert rejected.startswith("rejected line 2: invalid_json_line: ")
    assert "2 (1 rejected)" in run.stdout
    assert _files_named(shared_stack, path.name) == []  # the dry run left nothing stored


def test_dry_run_rejects_the_lines_a_create_rejects(shared_stack: RunningStack, tmp_path: Path) -> None:
    """The CLI dropped blank lines and sent a non-JSON line as a JSON string: its dry run said
    `line 2: invalid_record` where the create says `line 4: invalid_json_line`."""
    env = _client_env(shared_stack)
    first, second = (json.dumps(r).encode() for r in chat_records(2, prefix=f"cli-lines-{time.time_ns()}"))
    path = tmp_path / f"lines-{time.time_ns()}.jsonl"
    path.write_bytes(first + b"\n\n\ngarbage\n" + second + b"\n")
    create = ("batches", "create", "--input-file", str(path), "--endpoint", "/v1/chat/completions")

    dry = run_cli(*create, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    real = run_cli(*create, env=env)
    assert real.returncode == 0, real.stderr
    assert _rejected_lines(dry.stderr) == _rejected_lines(real.stderr)
    assert [line.split(":")[:2] for line in _rejected_lines(dry.stderr)] == [
        ["rejected line 4", " invalid_json_line"]
    ]


def test_dry_run_does_not_point_at_a_rejections_file(shared_stack: RunningStack, tmp_path: Path) -> None:
    """A dry run stores no rejections file, yet the CLI said every rejection was in one."""
    records = [*chat_records(1, prefix="cli-dry-note"), {"custom_id": "broken", "method": "POST"}]
    (tmp_path / "in.jsonl").write_bytes(jsonl(records))
    run = run_cli("batches", "create", "--input-file", str(tmp_path / "in.jsonl"),
                  "--endpoint", "/v1/chat/completions", "--dry-run",
                  env=_client_env(shared_stack))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "rejected line 2 [broken]:" in run.stderr
    assert "error file" not in run.stderr and "every rejection is in" not in run.stderr
    assert "1 record(s) rejected; a dry run stores no rejections file" in run.stderr


@pytest.mark.parametrize("target", ["ingest", "scheduler", "results", "executor", "envoy", "simulator"])
def test_health_verb_answers_for_every_part_of_a_running_stack(
    shared_stack: RunningStack, target: str
) -> None:
    run = run_cli("health", target, env=shared_stack.env)
    assert run.returncode == 0, run.stderr
    assert "is ready" in run.stdout


def test_health_verb_probes_any_address_naming_the_service_there(shared_stack: RunningStack) -> None:
    env = shared_stack.env
    scheduler = f"127.0.0.1:{shared_stack.settings.scheduler_port}"
    assert run_cli("health", scheduler, "--service", "scheduler", env=env).returncode == ExitCode.OK
    # With mutual TLS the probe checks the identity in the server's certificate: it must be named.
    unnamed = run_cli("health", scheduler, env=env)
    assert unnamed.returncode == ExitCode.INVALID and "--service" in unnamed.stderr
    assert run_cli("health", scheduler, "--service", "results", env=env).returncode == ExitCode.OTHER


def test_health_verb_fails_for_nothing_listening_and_unknown_targets(
    shared_stack: RunningStack, tmp_path: Path
) -> None:
    nothing = f"127.0.0.1:{free_port()}"
    probe = ("health", nothing, "--service", "scheduler", "--timeout", "1")
    assert run_cli(*probe, env=shared_stack.env).returncode == ExitCode.OTHER
    assert run_cli("health", "nonsense").returncode == ExitCode.INVALID
    # Without the certificates (another data directory) the probe says which files it misses.
    missing = run_cli(*probe, env={"BATCHGATE_DATA_DIR": str(tmp_path)})
    assert missing.returncode == ExitCode.INVALID and "BATCHGATE_TLS_CERT_FILE" in missing.stderr


def test_operator_key_verbs_follow_the_exit_codes(database_url: str) -> None:
    env = {"BATCHGATE_DATABASE_URL": database_url}
    created = run_cli("keys", "create", "--project", "cli", "--name", "ops", env=env)
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    assert secret.startswith("bg-")
    listed = run_cli("keys", "list", "--json", env=env)
    keys = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(k["project"], k["name"], k["state"]) for k in keys] == [("cli", "ops", "active")]
    assert secret.startswith(keys[0]["prefix"])

    assert run_cli("keys", "revoke", keys[0]["id"], env=env).returncode == ExitCode.OK
    again = run_cli("keys", "revoke", keys[0]["id"], env=env)
    assert again.returncode == ExitCode.CONFLICT and "already revoked" in again.stderr
    assert run_cli("keys", "revoke", "key_unknown", env=env).returncode == ExitCode.NOT_FOUND
    assert run_cli("keys", "create", "--budget", "-1", env=env).returncode == ExitCode.INVALID

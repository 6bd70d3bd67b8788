"""Guardrails through the real stack and the `openai` SDK (README "Guardrails"): what a filter
redacts is what the upstream receives and what is stored; a blocked record is rejected alone
with its line, custom_id and `guardrail_blocked` naming the rule; the moderation hook fails
open or closed as configured, and its URL is held to the webhook address policy."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from aiohttp import web

from batchgate.exit_codes import ExitCode
from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.fake_upstream import FakeUpstream, catalogue
from tests.support import (
    RunningStack,
    db_rows,
    free_port,
    fresh_database,
    run_cli,
    running_stack,
    upload,
    wait_for_batch,
)

PII = "mail ada@example.com, card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, tel +44 20 7946 0958"
REDACTED = "mail [REDACTED_EMAIL], card [REDACTED_CARD], IBAN [REDACTED_IBAN], tel [REDACTED_PHONE]"


class Moderation:
    """An OpenAI-moderation-shaped endpoint on loopback: flags texts that mention 'violent'."""

    def __init__(self) -> None:
        self.port = free_port()
        self.seen: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _moderate(self, request: web.Request) -> web.Response:
        text = (await request.json())["input"]
        self.seen.append(text)
        flagged = "violent" in text
        result = {"flagged": flagged, "categories": {"violence": flagged, "hate": False}}
        return web.json_response({"id": "modr-1", "model": "fake", "results": [result]})

    async def _redirect(self, _request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/v1/moderations")

    async def _no_verdict(self, request: web.Request) -> web.Response:
        self.seen.append((await request.json())["input"])
        return web.json_response({"id": "modr-2", "model": "fake", "results": []})

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/moderations", self._moderate)
        app.router.add_post("/redirect", self._redirect)  # to a URL the policy might refuse
        app.router.add_post("/no-verdict", self._no_verdict)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()

    def __enter__(self) -> Moderation:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def setup(
    db_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningStack, FakeUpstream, Moderation]]:
    tmp: Path = tmp_path_factory.mktemp(f"guardrails-{db_kind}")
    with FakeUpstream(latency_s=0.01) as upstream, Moderation() as moderation:
        config = catalogue(
            tmp / "catalogue.yaml", {"fake": {"base_url": upstream.base_url, "api_keys": ["k"]}}
        )
        with fresh_database(db_kind, tmp) as url, running_stack(tmp, url, BATCHGATE_CONFIG=config) as stack:
            yield stack, upstream, moderation


def record(custom_id: str, text: str) -> dict[str, Any]:
    body = {"model": "fake", "messages": [{"role": "user", "content": text}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def create(stack: RunningStack, project: str, records: list[dict[str, Any]]) -> Any:
    client = stack.client(project)
    return client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )


def test_redaction_reaches_the_upstream_and_blocked_records_are_rejected_alone(
    setup: tuple[RunningStack, FakeUpstream, Moderation],
) -> None:
    stack, upstream, moderation = setup
    cli(stack, "projects", "create", "guarded")
    moderation_url = f"http://127.0.0.1:{moderation.port}/v1/moderations"
    cli(
        stack, "projects", "set-guardrails", "guarded",
        "--block-keywords", "forbidden,secret",
        "--block-regex", r"ticket=TCK-\d{4}",
        "--redact", "email,phone,card,iban",
        "--moderation-url", moderation_url,
        "--moderation-fail", "closed",
    )  # fmt: skip
    assert "guardrails: block-keywords=forbidden,secret" in cli(stack, "projects", "list").stdout
    new_key(stack, "guarded")
    records = [
        record("pii", PII),
        record("kw", "this is Forbidden."),
        record("re", "see TCK-1234"),
        record("mod", "a violent story"),
        record("plain", "guarded plain"),
    ]
    batch = create(stack, "guarded", records)
    rejected = [
        (r["line"], r["custom_id"], r["code"], r["message"]) for r in batch.model_extra["rejected_records"]
    ]
    rule = "The record was blocked by the guardrail rule"
    assert rejected == [
        (2, "kw", "guardrail_blocked", f"{rule} 'keyword:forbidden'."),
        (3, "re", "guardrail_blocked", f"{rule} 'regex:ticket'."),
        (4, "mod", "guardrail_blocked", f"{rule} 'moderation:violence'."),
    ]
    done = wait_for_batch(stack.client("guarded"), batch.id)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 2, 3)
    # GET /v1/usage counts the blocked records as rejections (they cost nothing).
    answer = httpx.get(
        f"{stack.base_url}/usage",
        params={"batch_id": batch.id},
        headers={"Authorization": f"Bearer {stack.keys['guarded']}"},
        timeout=30,
    )
    [group] = answer.json()["data"]
    assert (group["requests"], group["rejected_requests"]) == (2, 3)
    sent = [c.content for c in upstream.calls()]
    assert sorted(c for c in sent if c in (REDACTED, "guarded plain")) == ["guarded plain", REDACTED]
    assert not any("ada@" in c or "forbidden" in c.lower() or "violent" in c for c in sent)
    # Moderation saw the redacted text, never the PII; the stored item holds what was sent.
    assert REDACTED in moderation.seen and not any("ada@" in text for text in moderation.seen)
    bodies = db_rows(stack.database_url, "SELECT body FROM items WHERE batch_id = :b AND idx = 0", b=batch.id)
    assert orjson.loads(bodies[0][0])["messages"][0]["content"] == REDACTED


@pytest.mark.parametrize("fail", ["open", "closed"])
@pytest.mark.parametrize("where", ["unreachable", "refused by the address policy"])
def test_the_moderation_hook_fails_open_or_closed(
    setup: tuple[RunningStack, FakeUpstream, Moderation], fail: str, where: str
) -> None:
    stack, upstream, _ = setup
    project = f"mod-{fail}-{where.split()[0]}"
    url = (
        f"http://127.0.0.1:{free_port()}/v1/moderations"
        if where == "unreachable"
        else "http://169.254.169.254/"
    )
    cli(stack, "projects", "create", project)
    cli(
        stack, "projects", "set-guardrails", project, "--moderation-url", url,
        "--moderation-fail", fail, "--moderation-timeout", "2",
    )  # fmt: skip
    new_key(stack, project)
    records = [record(f"{project}-{i}", f"{project} text {i}") for i in range(2)]
    if fail == "open":
        batch = create(stack, project, records)
        assert wait_for_batch(stack.client(project), batch.id).request_counts.completed == 2
        return
    with pytest.raises(openai.BadRequestError) as caught:
        create(stack, project, records)
    assert caught.value.code == "no_valid_records"
    assert {r["message"] for r in caught.value.body["rejected_records"]} == {
        "The record was blocked by the guardrail rule 'moderation:unavailable'."
    }
    assert not any(c.content.startswith(project) for c in upstream.calls())


@pytest.mark.parametrize("path", ["redirect", "no-verdict"])
def test_a_redirect_or_an_answer_with_no_verdict_is_no_pass(
    setup: tuple[RunningStack, FakeUpstream, Moderation], path: str
) -> None:
    """A redirect was followed past the address policy the URL was held to, and `{"results": []}`
    let every record through with `--moderation-fail closed`."""
    stack, upstream, moderation = setup
    project = f"mod-{path}"
    cli(stack, "projects", "create", project)
    url = f"http://127.0.0.1:{moderation.port}/{path}"
    cli(stack, "projects", "set-guardrails", project, "--moderation-url", url, "--moderation-fail", "closed")
    new_key(stack, project)
    with pytest.raises(openai.BadRequestError) as caught:
        create(stack, project, [record(f"{project}-0", f"{project} peaceful text")])
    assert caught.value.code == "no_valid_records"
    (rejected,) = caught.value.body["rejected_records"]  # type: ignore[index]
    assert rejected["message"] == "The record was blocked by the guardrail rule 'moderation:unavailable'."
    assert not any(project in text for text in moderation.seen if path == "redirect")
    assert not any(c.content.startswith(project) for c in upstream.calls())


def test_guardrails_are_off_by_default_and_can_be_turned_off(
    setup: tuple[RunningStack, FakeUpstream, Moderation],
) -> None:
    stack, upstream, _ = setup
    cli(stack, "projects", "create", "unguarded")
    new_key(stack, "unguarded")
    batch = create(stack, "unguarded", [record("u", "unguarded " + PII)])
    wait_for_batch(stack.client("unguarded"), batch.id)
    assert any(c.content == "unguarded " + PII for c in upstream.calls())
    cli(stack, "projects", "set-guardrails", "unguarded", "--redact", "email")
    assert "unguarded\tno budget\tguardrails: redact=email" in cli(stack, "projects", "list").stdout
    cli(stack, "projects", "set-guardrails", "unguarded", "--off")
    assert "unguarded\tno budget\tno limits" in cli(stack, "projects", "list").stdout


NO_FILTER = "or --off to turn them off"


@pytest.mark.parametrize(
    "flags, says",
    [
        ((), NO_FILTER),
        (("--moderation-fail", "closed"), NO_FILTER),
        (("--moderation-timeout", "3"), NO_FILTER),
        (("--block-keywords", " , "), NO_FILTER),
        (("--redact", "email", "--moderation-fail", "closed"), "--moderation-fail needs --moderation-url"),
        (
            ("--block-keywords", "a", "--moderation-timeout", "3"),
            "--moderation-timeout needs --moderation-url",
        ),
    ],
)
def test_a_call_that_names_no_filter_is_refused_and_keeps_the_guardrails(
    setup: tuple[RunningStack, FakeUpstream, Moderation], flags: tuple[str, ...], says: str
) -> None:
    """`set-guardrails` replaces the whole set: with no filter named it stored none, and
    `--moderation-fail closed` alone dropped blocking and redaction with exit 0. `--off` turns
    them off; moderation tuning without `--moderation-url` would be stored unused."""
    stack, _, _ = setup
    project = f"keep-{uuid.uuid4().hex[:6]}"
    cli(stack, "projects", "create", project)
    cli(stack, "projects", "set-guardrails", project, "--block-keywords", "secret", "--redact", "email")
    refused = run_cli("projects", "set-guardrails", project, *flags, env=stack.env)
    assert refused.returncode == ExitCode.INVALID, (refused.stdout, refused.stderr)
    [message] = refused.stderr.splitlines()
    assert message.startswith("error: ") and says in message, message
    kept = f"{project}\tno budget\tguardrails: block-keywords=secret redact=email"
    assert kept in cli(stack, "projects", "list").stdout


def test_the_responses_instructions_are_blocked_and_redacted(
    setup: tuple[RunningStack, FakeUpstream, Moderation],
) -> None:
    """The web panel puts its system prompt in `instructions`: it went upstream unfiltered."""
    stack, _, _ = setup
    cli(stack, "projects", "create", "instructed")
    cli(stack, "projects", "set-guardrails", "instructed", "--block-keywords", "secret", "--redact", "email")
    new_key(stack, "instructed")
    records = [
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/responses",
            "body": {"model": "fake", "instructions": instructions, "input": "hi", "max_output_tokens": 5},
        }
        for custom_id, instructions in (("blk", "the secret is 42"), ("red", "mail bob@example.com"))
    ]
    client = stack.client("instructed")
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/responses", completion_window="24h"
    )
    wait_for_batch(client, batch.id)  # it fails upstream (the fake answers chat only); the body counts
    [rejected] = batch.model_extra["rejected_records"]
    assert (rejected["custom_id"], rejected["code"]) == ("blk", "guardrail_blocked")
    assert "'keyword:secret'" in rejected["message"]
    [[stored]] = db_rows(
        stack.database_url, "SELECT body FROM items WHERE batch_id = :b AND idx = 1", b=batch.id
    )
    assert orjson.loads(stored)["instructions"] == "mail [REDACTED_EMAIL]"


def test_a_moderation_url_no_resolver_takes_is_refused_and_one_stored_fails_closed(
    setup: tuple[RunningStack, FakeUpstream, Moderation],
) -> None:
    """A DNS label over 63 characters made `getaddrinfo` raise UnicodeError: the command stored
    such a URL, and every create of the project then failed with a 500."""
    stack, upstream, _ = setup
    project = "mod-bad-host"
    cli(stack, "projects", "create", project)
    bad = "http://" + "a" * 64 + ".example/v1/moderations"
    refused = run_cli("projects", "set-guardrails", project, "--moderation-url", bad, env=stack.env)
    assert refused.returncode != 0 and "not a valid host name" in refused.stderr, refused.stderr
    stored = f"http://127.0.0.1:{free_port()}/v1/moderations"
    cli(
        stack, "projects", "set-guardrails", project, "--moderation-url", stored,
        "--moderation-fail", "closed", "--moderation-timeout", "2",
    )  # fmt: skip
    db_rows(  # as stored before the command refused such URLs
        stack.database_url,
        "UPDATE projects SET policy = replace(policy, :stored, :bad) WHERE name = :name",
        stored=stored,
        bad=bad,
        name=project,
    )
    new_key(stack, project)
    with pytest.raises(openai.BadRequestError) as caught:
        create(stack, project, [record(f"{project}-{i}", f"{project} text {i}") for i in range(2)])
    assert caught.value.code == "no_valid_records"
    assert {r["message"] for r in caught.value.body["rejected_records"]} == {
        "The record was blocked by the guardrail rule 'moderation:unavailable'."
    }
    assert not any(c.content.startswith(project) for c in upstream.calls())

"""The web panel in a real browser (Debian's chromium, headless, driven by Playwright) against a
real stack: Envoy serving /ui/, the services, the simulated upstream.

A user pastes a key, uploads a CSV and follows the batch to its output, cancels a running
batch, edits tags and filters by them, pages the list, and reads the rejected records. The
gateway's outages are played by the browser failing the panel's calls (`Page.route`). Every
page's screenshot is saved under `test-artifacts/panel/` (ignored by git). The panel calls only
the public API, so one database kind is enough here; the API's own tests run on both.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import openai
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from batchgate.gateway.panel import UI_DIR
from batchgate.services.common import auth
from batchgate.services.common.access_policy import Scope
from batchgate.services.common.db import Database
from tests.support import RunningStack, add_project, chat_records, jsonl, upload, wait_for_batch

pytestmark = pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "panel"
WAIT_MS = 60_000  # deadline for anything the stack does (a noisy 2-core machine)
PROJECT = "panel"
PAGING_PROJECT = "panel-paging"
READ_ONLY = "panel-read-only"  # a key of PROJECT with only `batches:read`: no cancel, no download
PAGED_BATCHES = 25  # three pages of 10
LIST_CALL = re.compile(r"/v1/batches\?")
BATCH_CALL = re.compile(r"/v1/batches/[^/?]+$")
DESKTOP = {"width": 1200, "height": 900}
PHONE = {"width": 390, "height": 844}

expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def stack(shared_stack: RunningStack) -> RunningStack:
    """The shared stack with projects of the panel tests' own, so listings are theirs alone.

    Made before the browser starts: Playwright's sync API runs an event loop on this thread,
    and the stack helpers' `asyncio.run` cannot run inside it."""
    for project in (PROJECT, PAGING_PROJECT):
        if project not in shared_stack.keys:
            add_project(shared_stack, project)
    if READ_ONLY not in shared_stack.keys:
        shared_stack.keys[READ_ONLY] = asyncio.run(_read_only_key(shared_stack, PROJECT))
    return shared_stack


async def _read_only_key(stack: RunningStack, project: str) -> str:
    db = Database(stack.database_url)
    try:
        project_id = await auth.ensure_project(db, project)
        scopes = frozenset({Scope.BATCHES_READ})
        return (await auth.create_key(db, project_id, name=f"test-{READ_ONLY}", scopes=scopes)).secret
    finally:
        await db.dispose()


@pytest.fixture(scope="module")
def browser(stack: RunningStack) -> Iterator[Browser]:
    assert CHROMIUM.exists(), "the panel tests drive Debian's chromium: `make test` installs it"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Panel:
    """One browser tab on the panel, signed in with a project's key (`stack.keys[project]`)."""

    def __init__(self, page: Page, stack: RunningStack, project: str) -> None:
        self.page = page
        self.stack = stack
        self.key = stack.keys[project]
        self.client = stack.client(project)
        self.problems: list[str] = []
        page.on("pageerror", lambda error: self.problems.append(f"uncaught: {error}"))
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            self.problems.append(f"CSP: {message.text}")

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.stack.settings.port}"

    def open(self, route: str = "#/batches") -> None:
        self.page.goto(f"{self.origin}/ui/{route}")

    def sign_in(self) -> None:
        """Types the key and presses Enter, as a keyboard user does."""
        key_input = self.page.get_by_label("API key", exact=True)
        expect(key_input).to_be_focused()
        self.page.keyboard.type(self.key)
        self.page.keyboard.press("Enter")
        expect(self.page.get_by_role("button", name="Forget key")).to_be_visible()

    def shot(self, name: str) -> None:
        self.assert_accessible()
        self.page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)

    def assert_accessible(self) -> None:
        """Every visible control has an accessible name, and nothing is wider than the window."""
        unnamed = self.page.evaluate(
            """() => [...document.querySelectorAll('input, select, textarea, button, a[href]')]
                .filter((el) => el.offsetParent !== null || el === document.activeElement)
                .filter((el) => {
                  const labelled = el.labels && [...el.labels].some((l) => l.textContent.trim());
                  const aria = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
                  const text = ['BUTTON', 'A'].includes(el.tagName) && el.textContent.trim();
                  return !(labelled || aria || text);
                })
                .map((el) => el.outerHTML.slice(0, 120))"""
        )
        assert unnamed == [], unnamed
        widths = self.page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"

    def batch_status(self) -> Any:
        return expect(self.page.locator(".status-line .badge"))

    def open_completed_batch(self, batch_id: str) -> None:
        """Sign in on a batch's page and wait until it shows the batch completed."""
        self.open(f"#/batches/{batch_id}")
        self.sign_in()
        self.batch_status().to_have_text("completed")

    def created_batch_id(self) -> str:
        expect(self.page.get_by_role("heading", name="Batch created")).to_be_visible()
        return self.page.locator("#result .card.success a.mono").inner_text()


def _tab(browser: Browser, stack: RunningStack, project: str) -> Iterator[Panel]:
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    tab = Panel(context.new_page(), stack, project)
    try:
        yield tab
        assert tab.problems == []
    finally:
        context.close()


@pytest.fixture
def panel(browser: Browser, stack: RunningStack) -> Iterator[Panel]:
    yield from _tab(browser, stack, PROJECT)


@pytest.fixture
def paging_panel(browser: Browser, stack: RunningStack) -> Iterator[Panel]:
    yield from _tab(browser, stack, PAGING_PROJECT)


@pytest.fixture
def read_only_panel(browser: Browser, stack: RunningStack) -> Iterator[Panel]:
    yield from _tab(browser, stack, READ_ONLY)


@pytest.fixture(scope="module")
def paged_ids(stack: RunningStack) -> list[str]:
    """PAGED_BATCHES batches of PAGING_PROJECT, newest first."""

    def create(i: int) -> str:
        body = {
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "requests": [{"body": chat_records(1, prefix=f"page-{i}")[0]["body"]}],
        }
        headers = {"Authorization": f"Bearer {stack.keys[PAGING_PROJECT]}"}
        answer = httpx.post(f"{stack.base_url}/batches", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["id"])

    return [create(i) for i in range(PAGED_BATCHES)][::-1]


def _upload(page: Page, name: str, data: bytes, mime: str) -> None:
    page.locator("#file-input").set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}])
    expect(page.locator("#file-info")).to_contain_text(name)


def test_the_key_lives_in_session_storage_only(panel: Panel) -> None:
    page = panel.page
    seen: list[tuple[str, str | None]] = []
    page.on("request", lambda r: seen.append((r.url, r.headers.get("authorization"))))
    panel.open()
    page.get_by_label("API key", exact=True).fill("bg-not-a-real-key")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("alert")).to_contain_text("refused")
    panel.shot("sign-in-refused")

    panel.sign_in()
    storage = page.evaluate(
        "() => [sessionStorage.getItem('batchgate.apiKey'), localStorage.length, document.cookie]"
    )
    assert storage == [panel.key, 0, ""]
    api_calls = [(url, auth) for url, auth in seen if "/v1/" in url]
    assert api_calls and all(auth and auth.startswith("Bearer ") for _, auth in api_calls)
    assert not any(panel.key in url or "not-a-real" in url for url, _ in seen)
    assert panel.key not in page.url

    page.get_by_role("button", name="Forget key").click()
    expect(page.get_by_label("API key", exact=True)).to_be_visible()
    assert page.evaluate("() => sessionStorage.length") == 0


CSV = ('\ufeffprompt\r\n"Hello, world"\r\n"Two\nlines, ""quoted"""\r\n\r\nLast one\r\n').encode()
CSV_PROMPTS = {"row-1": "Hello, world", "row-2": 'Two\nlines, "quoted"', "row-4": "Last one"}


def test_a_csv_becomes_a_batch_that_completes_and_downloads(panel: Panel) -> None:
    page = panel.page
    panel.open("#/upload")
    panel.sign_in()
    _upload(page, "prompts.csv", CSV, "text/csv")
    expect(page.get_by_label("The first row is a header")).to_be_checked()
    page.get_by_label("Model").select_option("gpt-4o-mini")
    page.get_by_label("System prompt (optional)").fill("Answer in one word.")
    preview = page.locator("#preview pre")
    expect(page.locator("#csv-summary")).to_contain_text("3 request(s)")
    expect(preview).to_contain_text('"custom_id":"row-4"')
    expect(preview).to_contain_text('"content":"Answer in one word."')
    page.get_by_label("Priority", exact=True).select_option("expedited")
    page.get_by_role("button", name="Add tag").click()
    page.get_by_label("Tag 1 key").fill("team")
    page.get_by_label("Tag 1 value").fill("search")
    panel.shot("upload-csv-preview")

    page.get_by_role("button", name="Create batch").click()
    batch_id = panel.created_batch_id()
    expect(page.locator("#result")).to_contain_text("holds 3 request(s); 0 rejected")
    panel.shot("upload-created")

    page.get_by_role("link", name="Follow the batch").click()
    panel.batch_status().to_have_text("completed")
    expect(page.locator(".counts")).to_contain_text("3 of 3")
    expect(page.locator("#cost")).to_contain_text("$")
    panel.shot("batch-completed")

    with page.expect_download() as caught:
        page.get_by_role("button", name="Download output").click()
    download = caught.value
    assert download.suggested_filename == f"{batch_id}_output.jsonl"
    lines = [json.loads(line) for line in Path(download.path()).read_text().splitlines()]
    assert [line["custom_id"] for line in lines] == list(CSV_PROMPTS)
    assert {line["response"]["status_code"] for line in lines} == {200}

    page.set_viewport_size(PHONE)
    panel.open("#/upload")
    _upload(page, "prompts.csv", CSV, "text/csv")
    expect(page.locator("#csv-summary")).to_contain_text("3 request(s)")
    panel.shot("upload-phone")

    # What ran is what the API takes from any client: full input lines for the chosen model.
    batch = panel.client.batches.retrieve(batch_id)
    assert (batch.metadata, batch.model, batch.model_extra["priority"]) == (
        {"team": "search"},
        "gpt-4o-mini",
        "expedited",
    )
    sent = [json.loads(line) for line in panel.client.files.content(batch.input_file_id).text.splitlines()]
    assert sent == [
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "system", "content": "Answer in one word."},
                    {"role": "user", "content": prompt},
                ],
            },
        }
        for custom_id, prompt in CSV_PROMPTS.items()
    ]


def test_a_running_batch_shows_its_rate_and_is_cancelled(panel: Panel) -> None:
    page = panel.page
    panel.open("#/upload")
    panel.sign_in()
    # The simulated upstream answers one request a second, then holds the last two for 10 s:
    # the page sees progress move (a rate, a time left), and the batch is still running when
    # it is cancelled.
    delays_ms = [1000, 2000, 3000, 4000, 5000, 10_000, 10_000]
    records = chat_records(len(delays_ms), prefix="panel-slow")
    for record, delay in zip(records, delays_ms, strict=True):
        record["body"]["x_sim"] = {"delay_ms": delay}
    _upload(page, "slow.jsonl", jsonl(records), "application/jsonl")
    expect(page.locator("#preview pre")).to_contain_text("panel-slow-0")
    expect(page.get_by_label("Endpoint")).to_have_value("/v1/chat/completions")
    page.get_by_role("button", name="Create batch").click()
    batch_id = panel.created_batch_id()
    page.get_by_role("link", name="Follow the batch").click()
    panel.batch_status().to_have_text("in progress")
    expect(page.locator("#rate")).to_have_text(re.compile(r"^\d+\.\d/s$"))
    expect(page.locator("#eta")).to_have_text(re.compile(r"^\d+(s|m\d\ds)$"))
    expect(page.get_by_role("progressbar", name="Batch progress")).to_have_attribute("aria-valuemax", "7")
    panel.shot("batch-running")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel batch").click()
    panel.batch_status().to_have_text("cancelling")
    expect(page.get_by_role("button", name="Cancel batch")).to_have_count(0)
    panel.shot("batch-cancelling")
    panel.batch_status().to_have_text("cancelled")
    panel.shot("batch-cancelled")
    assert panel.client.batches.retrieve(batch_id).status == "cancelled"


def test_tags_are_edited_and_filter_the_list(panel: Panel) -> None:
    client = panel.client

    def create(prefix: str, metadata: dict[str, str]) -> Any:
        return client.batches.create(
            input_file_id=upload(client, chat_records(1, prefix=prefix)).id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata=metadata,
        )

    tagged = create("panel-tagged", {"team": "search", "stage": "draft"})
    other = create("panel-other", {"team": "ads"})
    for batch in (tagged, other):
        wait_for_batch(client, batch.id)

    page = panel.page
    panel.open_completed_batch(tagged.id)
    # Tags are listed by key (the API keeps no order): stage, then team.
    expect(page.get_by_label("Tag 1 key")).to_have_value("stage")
    expect(page.get_by_label("Tag 2 key")).to_have_value("team")
    page.get_by_label("Tag 1 value").fill("reviewed")
    page.get_by_role("button", name="Remove tag 2").click()
    page.get_by_role("button", name="Add tag").click()
    page.keyboard.type("owner")  # the new row's key field has the focus
    page.keyboard.press("Tab")
    page.keyboard.type("qa")
    page.get_by_role("button", name="Save tags").click()
    expect(page.locator(".tags-form .form-status")).to_have_text("Tags saved.")
    panel.shot("batch-tags-saved")
    assert client.batches.retrieve(tagged.id).metadata == {"stage": "reviewed", "owner": "qa"}

    page.get_by_role("link", name="All batches").click()
    page.get_by_label("Status").select_option("completed")
    page.get_by_label("Tag", exact=True).fill("owner=qa")
    page.get_by_role("button", name="Apply").click()
    rows = page.locator("table.batches tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(tagged.id)
    expect(rows.first.locator(".chip")).to_have_text(["owner=qa", "stage=reviewed"])
    assert "tag=owner%3Dqa" in page.url and "status=completed" in page.url
    panel.shot("list-filtered")

    page.get_by_label("Tag", exact=True).fill("team=ads")
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(other.id)

    page.set_viewport_size(PHONE)
    page.get_by_role("link", name="Clear").click()
    expect(rows.first).to_be_visible()
    panel.shot("list-phone")
    page.get_by_role("link", name=tagged.id).click()
    panel.batch_status().to_have_text("completed")
    panel.shot("batch-phone")


def test_saving_tags_left_alone_changes_nothing(panel: Panel) -> None:
    """The editor sends keys and values exactly as they stand: spaces around a key belong to it
    (the API takes them, and filters by them), a line break a text field cannot show stays in a
    value the user did not touch, and `constructor` is a key like any other. What the user types
    is sent as typed, spaces and all; a tag with a space inside filters the list."""
    client = panel.client
    batch = client.batches.create(
        input_file_id=upload(client, chat_records(1, prefix="panel-spaces")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    wait_for_batch(client, batch.id)
    metadata = {" sp ": " v ", "constructor": "c", "k": "x", "note": "one\ntwo", "stage": "needs review"}
    client.post(f"/batches/{batch.id}/metadata", body={"metadata": metadata}, cast_to=dict)

    def found_by(key: str) -> bool:
        # %20, not the SDK's `+`: the gateway reads a `+` in a query as a plus
        answer = httpx.get(
            f"{panel.stack.base_url}/batches?limit=100&metadata_key={quote(key)}",
            headers={"Authorization": f"Bearer {panel.key}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return batch.id in [b["id"] for b in answer.json()["data"]]

    assert found_by(" sp ")
    page = panel.page
    panel.open_completed_batch(batch.id)
    expect(page.get_by_label("Tag 1 key")).to_have_value(" sp ")
    expect(page.get_by_label("Tag 1 value")).to_have_value(" v ")
    page.get_by_role("button", name="Save tags").click()
    expect(page.locator(".tags-form .form-status")).to_have_text("Tags saved.")
    assert client.batches.retrieve(batch.id).metadata == metadata
    assert found_by(" sp ")

    page.get_by_role("button", name="Add tag").click()
    page.keyboard.type(" owner ")  # the new row's key field has the focus
    page.keyboard.press("Tab")
    page.keyboard.type(" qa ")
    page.get_by_label("Tag 3 value").fill("y")  # k
    page.get_by_role("button", name="Save tags").click()
    expect(page.locator(".tags-form .form-status")).to_have_text("Tags saved.")
    assert client.batches.retrieve(batch.id).metadata == {**metadata, "k": "y", " owner ": " qa "}

    page.get_by_role("link", name="All batches").click()
    page.get_by_label("Tag", exact=True).fill("stage=needs review")
    page.get_by_role("button", name="Apply").click()
    rows = page.locator("table.batches tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(batch.id)


def test_a_cost_below_a_millionth_of_a_dollar_is_not_shown_as_zero(panel: Panel) -> None:
    """An embeddings batch of 9 tokens costs $0.00000009: the page shows that amount, to two
    significant digits, not `$0.000000`."""
    client = panel.client
    body = {"model": "text-embedding-3-small", "input": "x" * 34}  # 36 characters of JSON: 9 tokens
    record = {"custom_id": "tiny", "method": "POST", "url": "/v1/embeddings", "body": body}
    batch = client.batches.create(
        input_file_id=upload(client, [record]).id, endpoint="/v1/embeddings", completion_window="24h"
    )
    done = wait_for_batch(client, batch.id)
    assert done.status == "completed"
    amount = done.model_extra["cost"]["amount"]
    assert 0 < amount < 0.000_001

    page = panel.page
    panel.open_completed_batch(batch.id)
    cost = page.locator("#cost")
    expect(cost).to_contain_text("$")
    shown = re.match(r"\$(0\.0+[1-9]\d?)(?: \(|$)", cost.inner_text())
    assert shown, cost.inner_text()
    assert math.isclose(float(shown[1]), amount, rel_tol=0.05), (shown[1], amount)
    panel.shot("batch-tiny-cost")


def test_the_list_is_newest_first_and_pages(paging_panel: Panel, paged_ids: list[str]) -> None:
    tab, page = paging_panel, paging_panel.page
    tab.open("#/batches?limit=10")
    tab.sign_in()
    links = page.locator("table.batches tbody tr a.mono")
    expect(links).to_have_text(paged_ids[:10])
    tab.shot("list-page-1")
    page.get_by_role("link", name="Older →").click()
    expect(links).to_have_text(paged_ids[10:20])
    page.get_by_role("link", name="Older →").click()
    expect(links).to_have_text(paged_ids[20:])
    expect(page.get_by_role("link", name="Older →")).to_have_count(0)
    page.get_by_role("link", name="← Newer").click()
    expect(links).to_have_text(paged_ids[10:20])
    page.get_by_role("link", name="← Newer").click()
    expect(links).to_have_text(paged_ids[:10])
    expect(page.get_by_role("link", name="← Newer")).to_have_count(0)


def test_newer_follows_the_route_after_back_and_reload(paging_panel: Panel, paged_ids: list[str]) -> None:
    """The way back to newer pages is in the route, not in the page's memory: after Back, a
    reload or a copied link, "Newer" goes one page up."""
    tab, page = paging_panel, paging_panel.page
    tab.open("#/batches?limit=10")
    tab.sign_in()
    links = page.locator("table.batches tbody tr a.mono")
    newer = page.get_by_role("link", name="← Newer")
    expect(links).to_have_text(paged_ids[:10])
    page.get_by_role("link", name="Older →").click()
    expect(links).to_have_text(paged_ids[10:20])
    page.get_by_role("link", name="Older →").click()
    expect(links).to_have_text(paged_ids[20:])
    third_page = page.url

    page.go_back()
    expect(links).to_have_text(paged_ids[10:20])
    newer.click()
    expect(links).to_have_text(paged_ids[:10])

    page.goto(third_page)
    expect(links).to_have_text(paged_ids[20:])
    page.reload()
    expect(links).to_have_text(paged_ids[20:])
    newer.click()
    expect(links).to_have_text(paged_ids[10:20])
    newer.click()
    expect(links).to_have_text(paged_ids[:10])

    # A copied link, in a tab of its own: the same pages, the same way up.
    other = Panel(page.context.new_page(), tab.stack, PAGING_PROJECT)
    other.page.goto(third_page)
    other.sign_in()
    other_links = other.page.locator("table.batches tbody tr a.mono")
    expect(other_links).to_have_text(paged_ids[20:])
    other.page.get_by_role("link", name="← Newer").click()
    expect(other_links).to_have_text(paged_ids[10:20])
    other.page.get_by_role("link", name="← Newer").click()
    expect(other_links).to_have_text(paged_ids[:10])
    assert other.problems == []
    assert len(third_page) < 200, third_page  # the route holds two cursors, nothing more


def test_the_list_recovers_by_itself_after_an_outage(panel: Panel) -> None:
    page = panel.page
    panel.open("#/upload")
    panel.sign_in()
    page.route(LIST_CALL, lambda route: route.abort())  # the gateway is down
    panel.open("#/batches")
    results = page.locator("main .results")
    expect(results.get_by_role("alert")).to_contain_text("could not be reached")
    page.unroute(LIST_CALL)  # it is back: the list tries again by itself (3 s later)
    expect(results.locator("table.batches, p.empty")).to_be_visible(timeout=10_000)
    expect(results.get_by_role("alert")).to_have_count(0)


def test_a_named_retried_batch_shows_its_name_and_links(panel: Panel) -> None:
    client = panel.client
    failing = chat_records(2, prefix="panel-retry")
    failing[1]["body"]["x_sim"] = {"status": 400, "times": 1}
    source = client.post(
        "/batches",
        body={"model": "gpt-4o-mini", "name": "panel nightly", "requests": [r["body"] for r in failing]},
        cast_to=dict,
    )
    wait_for_batch(client, source["id"])
    retry = client.post(f"/batches/{source['id']}/retry", body={}, cast_to=dict)
    page = panel.page
    panel.open("#/batches")
    panel.sign_in()
    row = page.locator("table.batches tbody tr", has=page.locator(f"#link-{source['id']}"))
    expect(row.locator(".batch-name")).to_have_text("panel nightly")
    panel.open(f"#/batches/{source['id']}")
    expect(page.locator("#batch-name")).to_have_text("panel nightly")
    page.get_by_role("link", name=retry["id"]).click()
    expect(page.get_by_role("link", name=source["id"])).to_be_visible()  # "Retry of"
    assert panel.problems == []


def test_rejected_records_show_their_lines(panel: Panel) -> None:
    page = panel.page
    panel.open("#/upload")
    panel.sign_in()
    good = chat_records(3, prefix="panel-rej")
    lines = [
        json.dumps(good[0]),
        "{not json",
        "",
        json.dumps(good[1]),
        json.dumps(good[0]),  # custom_id again
        json.dumps({**good[2], "body": {**good[2]["body"], "model": "no-such-model"}}),
    ]
    _upload(page, "mixed.jsonl", ("\n".join(lines) + "\n").encode(), "application/jsonl")
    page.get_by_role("button", name="Create batch").click()
    batch_id = panel.created_batch_id()
    expect(page.locator("#result")).to_contain_text("3 rejected")
    table = page.locator("#create-rejections table tbody tr")
    expect(table).to_have_count(3)
    rejected = [row.split("\t") for row in table.all_inner_texts()]
    assert [(r[0], r[2]) for r in rejected] == [
        ("2", "invalid_json_line"),
        ("5", "duplicate_custom_id"),
        ("6", "model_not_found"),
    ]
    panel.shot("upload-rejections")

    page.get_by_role("link", name="Follow the batch").click()
    panel.batch_status().to_have_text("completed")
    on_batch = page.locator("table.rejections tbody tr")
    expect(on_batch).to_have_count(3)
    assert [row.split("\t")[0] for row in on_batch.all_inner_texts()] == ["2", "5", "6"]
    expect(page.locator("table.rejections")).to_contain_text("panel-rej-0")
    panel.shot("batch-rejections")
    with page.expect_download() as caught:
        page.get_by_role("button", name="Download rejections").click()
    assert caught.value.suggested_filename == f"{batch_id}_rejections.jsonl"

    # A CSV's rejections also name the CSV row they came from.
    panel.open("#/upload")
    _upload(page, "ids.csv", b"custom_id,prompt\nq1,First\n\nq1,Again\n", "text/csv")
    page.get_by_role("button", name="Create batch").click()
    panel.created_batch_id()
    row = page.locator("#create-rejections table tbody tr")
    expect(row).to_have_count(1)
    assert row.inner_text().split("\t")[:4] == ["2", "3", "q1", "duplicate_custom_id"]

    # No valid record at all: no batch, and the reasons are shown.
    panel.open("#/upload")
    _upload(page, "bad.jsonl", b"{oops\n", "application/jsonl")
    page.get_by_role("button", name="Create batch").click()
    expect(page.get_by_role("alert")).to_contain_text("The batch was not created")
    expect(page.locator("#create-rejections")).to_contain_text("invalid_json_line")
    panel.shot("upload-refused")


def test_a_batch_opened_while_the_gateway_is_down_shows_everything_once_it_is_back(panel: Panel) -> None:
    client = panel.client
    lines = [json.dumps(r) for r in chat_records(2, prefix="panel-offline")] + ["{not json"]
    batch = client.batches.create(
        input_file_id=upload(client, ("\n".join(lines) + "\n").encode()).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"team": "offline"},
    )
    wait_for_batch(client, batch.id)
    page = panel.page
    panel.open("#/upload")
    panel.sign_in()
    page.route(BATCH_CALL, lambda route: route.abort())  # the gateway is down
    panel.open(f"#/batches/{batch.id}")
    expect(page.get_by_role("alert")).to_contain_text("could not be reached")
    page.unroute(BATCH_CALL)  # it is back: the next poll (1 s later) answers
    panel.batch_status().to_have_text("completed")
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_label("Tag 1 key")).to_have_value("team")
    expect(page.get_by_role("button", name="Save tags")).to_be_visible()
    expect(page.locator("table.rejections tbody tr")).to_have_count(1)
    expect(page.locator("table.rejections")).to_contain_text("invalid_json_line")


def test_a_failed_cancel_or_download_stays_shown_while_the_batch_runs(
    read_only_panel: Panel, stack: RunningStack
) -> None:
    """The page polls a running batch every second; a refused action's error outlives the polls
    and goes when the user acts again or dismisses it."""
    owner = stack.client(PROJECT)
    records = chat_records(2, prefix="panel-refused")
    for record in records:
        record["body"]["x_sim"] = {"delay_ms": 30_000}  # running for the whole test
    batch = owner.batches.create(
        input_file_id=upload(owner, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    tab, page = read_only_panel, read_only_panel.page
    try:
        tab.open(f"#/batches/{batch.id}")
        tab.sign_in()
        tab.batch_status().to_have_text("in progress")
        alert = page.get_by_role("alert")

        def outlives_two_polls(text: str) -> None:
            expect(alert).to_have_count(1)
            expect(alert).to_contain_text(text)
            for _ in range(2):
                with page.expect_response(lambda r: BATCH_CALL.search(r.url) is not None and r.ok):
                    pass
            expect(alert).to_have_count(1)
            expect(alert).to_contain_text(text)

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Cancel batch").click()  # the key may not write: 403
        outlives_two_polls("batches:write")
        page.get_by_role("button", name="Download input").click()  # nor read files: 403
        outlives_two_polls("Download failed")
        tab.shot("batch-action-refused")
        page.get_by_role("button", name="Dismiss").click()
        expect(alert).to_have_count(0)
        tab.batch_status().to_have_text("in progress")
    finally:
        with contextlib.suppress(openai.ConflictError):  # ended already (when the test was slow)
            owner.batches.cancel(batch.id)


@pytest.mark.parametrize("typed", ["bg-KehfTP…", "{key}\u200b", "bg-two words", "bg-clé"])
def test_a_key_no_api_key_can_be_is_refused_without_asking_the_gateway(panel: Panel, typed: str) -> None:
    """The `…` ending a prefix in `batchgate keys list`, or an invisible character picked up with
    the copy, is named: not "the gateway could not be reached", and nothing is sent."""
    page = panel.page
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if "/v1/" in r.url else None)
    panel.open()
    key_input = page.get_by_label("API key", exact=True)
    key_input.fill(typed.format(key=panel.key))
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("alert")).to_contain_text("a character no API key has")
    expect(key_input).to_be_focused()
    assert sent == []
    assert page.evaluate("() => sessionStorage.length") == 0


def test_the_served_parser_is_the_locked_npm_package(stack: RunningStack, tmp_path: Path) -> None:
    """The Papa Parse file Envoy serves is byte for byte the one in the tarball whose integrity
    package-lock.json pins (npm takes it from its cache, or the registry)."""
    lock = json.loads((UI_DIR / "package-lock.json").read_text())["packages"]["node_modules/papaparse"]
    packed = subprocess.run(
        ["npm", "pack", f"papaparse@{lock['version']}", "--pack-destination", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    tarball = tmp_path / json.loads(packed.stdout)[0]["filename"]
    algorithm, _, expected = lock["integrity"].partition("-")
    digest = base64.b64encode(hashlib.new(algorithm, tarball.read_bytes()).digest()).decode()
    assert digest == expected
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/papaparse.min.js")
        assert member is not None
        locked = member.read()
    served = httpx.get(f"http://127.0.0.1:{stack.settings.port}/ui/vendor/papaparse.min.js", timeout=30)
    assert served.status_code == 200
    assert served.headers["content-type"] == "text/javascript; charset=utf-8"
    assert served.content == locked


@pytest.mark.parametrize("path", ["/", "/ui", "/ui?x=1"])
def test_the_root_and_ui_redirect_to_the_panel_with_an_empty_body(stack: RunningStack, path: str) -> None:
    answer = httpx.get(f"http://127.0.0.1:{stack.settings.port}{path}", timeout=30, follow_redirects=False)
    assert (answer.status_code, urlsplit(answer.headers["location"]).path) == (301, "/ui/")
    assert answer.content == b""

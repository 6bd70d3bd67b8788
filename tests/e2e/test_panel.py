"""The web panel in a real browser (Debian's chromium, headless, driven by Playwright) against a
real stack: Envoy serving /ui/, the services, the simulated upstream.

A user pastes a key, uploads a CSV and follows the batch to its output, cancels a running
batch, edits tags and filters by them, pages the list, and reads the rejected records. Every
page's screenshot is saved under `test-artifacts/panel/` (ignored by git). The panel calls only
the public API, so one database kind is enough here; the API's own tests run on both.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from batchgate.gateway.panel import UI_DIR
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
    return shared_stack


@pytest.fixture(scope="module")
def browser(stack: RunningStack) -> Iterator[Browser]:
    assert CHROMIUM.exists(), "the panel tests drive Debian's chromium: `make test` installs it"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Panel:
    """One browser tab on the panel, signed in with a project's key."""

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

    def created_batch_id(self) -> str:
        expect(self.page.get_by_role("heading", name="Batch created")).to_be_visible()
        return self.page.locator("#result .card.success a.mono").inner_text()


@pytest.fixture
def panel(browser: Browser, stack: RunningStack) -> Iterator[Panel]:
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    tab = Panel(context.new_page(), stack, PROJECT)
    try:
        yield tab
        assert tab.problems == []
    finally:
        context.close()


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
    panel.open(f"#/batches/{tagged.id}")
    panel.sign_in()
    panel.batch_status().to_have_text("completed")
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


def test_the_list_is_newest_first_and_pages(browser: Browser, stack: RunningStack) -> None:
    def create(i: int) -> str:
        body = {
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "requests": [{"body": chat_records(1, prefix=f"page-{i}")[0]["body"]}],
        }
        auth = {"Authorization": f"Bearer {stack.keys[PAGING_PROJECT]}"}
        answer = httpx.post(f"{stack.base_url}/batches", json=body, headers=auth, timeout=30)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["id"])

    ids = [create(i) for i in range(12)]
    newest_first = ids[::-1]
    context = browser.new_context(viewport=DESKTOP)
    try:
        tab = Panel(context.new_page(), stack, PAGING_PROJECT)
        page = tab.page
        tab.open("#/batches?limit=10")
        tab.sign_in()
        links = page.locator("table.batches tbody tr a.mono")
        expect(links).to_have_count(10)
        assert links.all_inner_texts() == newest_first[:10]
        tab.shot("list-page-1")
        page.get_by_role("link", name="Older →").click()
        expect(links).to_have_count(2)
        assert links.all_inner_texts() == newest_first[10:]
        expect(page.get_by_role("link", name="Older →")).to_have_count(0)
        page.get_by_role("link", name="← Newer").click()
        expect(links).to_have_count(10)
        assert links.all_inner_texts() == newest_first[:10]
        assert tab.problems == []
    finally:
        context.close()


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

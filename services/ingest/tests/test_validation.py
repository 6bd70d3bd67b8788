"""Per-record checks: each bad record gets its own precise code."""

from __future__ import annotations

import json

import pytest

from services.common.config import load_settings
from services.ingest.validation import Accepted, RecordChecker, Rejected, clip

ENDPOINT = "/v1/chat/completions"


def line(**overrides: object) -> bytes:
    record = {
        "custom_id": "a",
        "method": "POST",
        "url": ENDPOINT,
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    }
    record.update(overrides)
    return json.dumps(record).encode()


@pytest.fixture
def checker() -> RecordChecker:
    return RecordChecker(load_settings(environ={}), ENDPOINT)


def test_a_good_record_is_accepted_with_its_compact_body(checker: RecordChecker) -> None:
    outcome = checker.check(line())
    assert isinstance(outcome, Accepted)
    assert outcome.custom_id == "a" and outcome.model == "gpt-4o-mini"
    assert json.loads(outcome.body)["messages"][0]["content"] == "hi"


@pytest.mark.parametrize(
    "raw, code",
    [
        (b"{not json", "invalid_json_line"),
        (b"[1, 2]", "invalid_record"),
        (line(custom_id=None), "missing_custom_id"),
        (line(custom_id=""), "missing_custom_id"),
        (line(custom_id=7), "invalid_custom_id"),
        (line(custom_id="x" * 513), "invalid_custom_id"),
        (line(method="GET"), "invalid_method"),
        (line(url="/v1/embeddings"), "url_mismatch"),
        (line(body="text"), "invalid_body"),
        (line(body={"messages": []}), "missing_model"),
        (line(body={"model": "no-such-model"}), "model_not_found"),
        (line(body={"model": "text-embedding-3-small", "input": "x"}), "model_not_found"),
        (line(body={"model": "gpt-4o-mini", "stream": True}), "stream_not_supported"),
    ],
)
def test_bad_records_are_rejected_with_a_code(checker: RecordChecker, raw: bytes, code: str) -> None:
    outcome = checker.check(raw)
    assert isinstance(outcome, Rejected)
    assert outcome.code == code
    assert outcome.message


def test_duplicates_and_model_mismatch_depend_on_earlier_records(checker: RecordChecker) -> None:
    assert isinstance(checker.check(line(custom_id="a")), Accepted)
    duplicate = checker.check(line(custom_id="a"))
    assert isinstance(duplicate, Rejected) and duplicate.code == "duplicate_custom_id"
    mismatch = checker.check(line(custom_id="b", body={"model": "gpt-4o", "messages": []}))
    assert isinstance(mismatch, Rejected) and mismatch.code == "model_mismatch"
    assert mismatch.custom_id == "b"


def test_oversized_body_is_rejected() -> None:
    settings = load_settings(environ={"BATCHGATE_MAX_RECORD_BYTES": "100"})
    outcome = RecordChecker(settings, ENDPOINT).check(
        line(body={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 200}]})
    )
    assert isinstance(outcome, Rejected) and outcome.code == "record_too_large"


def test_messages_are_cut_to_512_bytes_with_an_ellipsis() -> None:
    assert clip("é" * 400).endswith("...")
    assert len(clip("é" * 400).encode()) <= 512
    assert clip("short") == "short"

"""Per-record checks: each bad record gets its own precise code."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.services.common.errors import clip
from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.validation import ANTHROPIC_CUSTOM_ID, Accepted, RecordChecker, Rejected

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
    limited = load_settings(environ={"BATCHGATE_MAX_RECORD_BYTES": "100"})
    outcome = RecordChecker(limited, ENDPOINT).check(
        line(body={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 200}]})
    )
    assert isinstance(outcome, Rejected) and outcome.code == "record_too_large"


def test_messages_are_cut_to_512_bytes_with_an_ellipsis() -> None:
    assert clip("é" * 400, 512).endswith("...")
    assert len(clip("é" * 400, 512).encode()) <= 512
    assert clip("short", 512) == "short"


@pytest.mark.parametrize(
    "raw, code",
    [
        (
            json.dumps({"custom_id": "a", "url": ENDPOINT, "body": {"model": "gpt-4o-mini"}}).encode(),
            "invalid_method",
        ),
        (
            json.dumps({"custom_id": "a", "method": "POST", "body": {"model": "gpt-4o-mini"}}).encode(),
            "url_mismatch",
        ),
    ],
    ids=["no method", "no url"],
)
def test_method_and_url_are_required(checker: RecordChecker, raw: bytes, code: str) -> None:
    outcome = checker.check(raw)
    assert isinstance(outcome, Rejected) and outcome.code == code and outcome.custom_id == "a"


@pytest.mark.parametrize("custom_id", ["x" * 513, "nul\x00inside"])
def test_custom_ids_that_cannot_be_stored_are_not_echoed(checker: RecordChecker, custom_id: str) -> None:
    outcome = checker.check(line(custom_id=custom_id))
    assert isinstance(outcome, Rejected) and outcome.code == "invalid_custom_id"
    assert outcome.custom_id is None


@pytest.mark.parametrize(
    "custom_id, accepted",
    [
        ("req_1-A", True),
        ("x" * 64, True),
        ("x" * 65, False),
        ("has space", False),
        ("dot.ted", False),
        ("trailing\n", False),
        ("ünï", False),
    ],
)
def test_the_anthropic_custom_id_format_is_an_option(custom_id: str, accepted: bool) -> None:
    config = load_settings(environ={})
    strict = RecordChecker(config, ENDPOINT, custom_id_pattern=ANTHROPIC_CUSTOM_ID)
    outcome = strict.check(line(custom_id=custom_id))
    assert isinstance(outcome, Accepted) is accepted
    if not accepted:
        assert isinstance(outcome, Rejected) and outcome.code == "invalid_custom_id"
    assert isinstance(RecordChecker(config, ENDPOINT).check(line(custom_id=custom_id)), Accepted)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "custom_id": st.text() | JSON,
        "method": st.just("POST") | JSON,
        "url": st.just(ENDPOINT) | JSON,
        "body": st.fixed_dictionaries({"model": st.just("gpt-4o-mini") | JSON}, optional={"stream": JSON})
        | JSON,
    },
).map(lambda r: json.dumps(r).encode())


@settings(max_examples=500, deadline=None)
@given(lines=st.lists(st.binary(max_size=200) | RECORDS, max_size=10))
def test_any_bytes_are_accepted_or_rejected_with_a_code_and_storable_fields(lines: list[bytes]) -> None:
    checker = RecordChecker(load_settings(environ={}), ENDPOINT)
    for raw in lines:
        outcome = checker.check(raw)
        if isinstance(outcome, Accepted):
            assert isinstance(json.loads(outcome.body), dict) and outcome.model == "gpt-4o-mini"
            assert outcome.custom_id and "\x00" not in outcome.custom_id
        else:
            assert isinstance(outcome, Rejected) and outcome.code and outcome.message
            assert len(outcome.message.encode()) <= 512
            assert outcome.custom_id is None or (
                len(outcome.custom_id) <= 512 and "\x00" not in outcome.custom_id
            )


@pytest.mark.parametrize(
    "custom_id, said", [(None, "The record has no 'custom_id'."), ("", "'custom_id' is empty")]
)
def test_a_missing_and_an_empty_custom_id_are_told_apart(
    checker: RecordChecker, custom_id: str | None, said: str
) -> None:
    outcome = checker.check(line(custom_id=custom_id))
    assert isinstance(outcome, Rejected) and outcome.message.startswith(said)

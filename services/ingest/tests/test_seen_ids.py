"""The custom_ids a create remembers, packed into buckets: exact, so a duplicate anywhere in
the input is rejected and nothing else is (not an id that is part of another, nor one that
shares its bucket)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.services.common import seen_ids
from batchgate.services.common.loading import load_settings
from batchgate.services.common.seen_ids import SeenIds
from batchgate.services.ingest.validation import Accepted, RecordChecker, Rejected

ENDPOINT = "/v1/chat/completions"


def _line(custom_id: str) -> bytes:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": custom_id}]}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}).encode()


def test_a_duplicate_is_rejected_however_far_apart_and_only_a_duplicate() -> None:
    checker = RecordChecker(load_settings(environ={}), ENDPOINT)
    ids = [f"req-{i}" for i in range(3000)]  # more ids than a bucket's share: buckets hold several
    assert all(isinstance(checker.check(_line(i)), Accepted) for i in ids)
    for custom_id in (ids[0], ids[1234], ids[-1]):
        outcome = checker.check(_line(custom_id))
        assert isinstance(outcome, Rejected) and outcome.code == "duplicate_custom_id"
    for fresh in ("req-", "req-1 ", "eq-1", "req-30000", "req-1\u00e9"):  # parts, extensions
        assert isinstance(checker.check(_line(fresh)), Accepted), fresh
    assert len(checker.seen_custom_ids) == 3005


def test_a_record_rejected_after_its_custom_id_passed_still_claims_it() -> None:
    # custom_ids are unique in a batch whatever becomes of their records: the results hold one
    # line per record, rejected ones included, and two lines with one custom_id can't be told apart.
    checker = RecordChecker(load_settings(environ={}), ENDPOINT)
    bad = checker.check(json.dumps({"custom_id": "late", "method": "GET"}).encode())
    assert isinstance(bad, Rejected) and bad.code == "invalid_method"
    unknown_model = {
        "custom_id": "gone",
        "method": "POST",
        "url": ENDPOINT,
        "body": {"model": "no-such-model"},
    }
    assert isinstance(checker.check(json.dumps(unknown_model).encode()), Rejected)
    for custom_id in ("late", "gone"):
        again = checker.check(_line(custom_id))
        assert isinstance(again, Rejected) and again.code == "duplicate_custom_id", custom_id
        assert again.custom_id == custom_id


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), max_size=80))
def test_it_answers_as_a_set_does_even_when_every_id_shares_a_bucket(ids: list[str]) -> None:
    original = seen_ids._MASK
    seen_ids._MASK = 0  # one bucket for all: only the separators keep ids apart
    try:
        seen, reference = SeenIds(), set[str]()
        for custom_id in ids:
            assert (custom_id in seen) == (custom_id in reference)
            if custom_id not in reference:
                seen.add(custom_id)
                reference.add(custom_id)
        assert all(i in seen for i in reference)
        assert len(seen) == len(reference)
    finally:
        seen_ids._MASK = original

"""Property: whatever bytes an input file holds, creating a batch from it never answers 5xx,
and every non-blank line is either accepted or rejected with a code and its line number."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.ingest_client import from_file
from tests.support import RunningStack, db_rows, read_jsonl

ENDPOINT = "/v1/chat/completions"
GOOD = {
    "custom_id": "c",
    "method": "POST",
    "url": ENDPOINT,
    "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "property"}]},
}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def mutated_record(draw: st.DrawFn) -> bytes:
    """A valid record with some fields dropped or replaced by arbitrary JSON."""
    record: dict[str, Any] = json.loads(json.dumps(GOOD))
    # Arbitrary text, plus ids that repeat and the ones storage could choke on (NUL, too long).
    record["custom_id"] = draw(
        st.text(max_size=70) | st.sampled_from(["c", "d", "a\x00b", "é" * 65, "x" * 600])
    )
    for name in draw(st.lists(st.sampled_from(["custom_id", "method", "url", "body"]), max_size=2)):
        if draw(st.booleans()):
            record.pop(name, None)
        else:
            record[name] = draw(JSON_VALUES)
    if draw(st.booleans()) and isinstance(record.get("body"), dict):
        record["body"][draw(st.sampled_from(["model", "stream", "messages"]))] = draw(JSON_VALUES)
    return json.dumps(record, ensure_ascii=draw(st.booleans())).encode()


LINE = st.one_of(
    st.binary(max_size=120),
    st.text(max_size=60).map(str.encode),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    mutated_record(),
).map(lambda raw: raw.replace(b"\n", b""))


def _record_lines(lines: list[bytes]) -> list[int]:
    """Line numbers (from 1) of the lines that hold a record: not blank, after a leading BOM."""
    numbers = []
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        line = line.removesuffix(b"\r")
        if line and not line.isspace():
            numbers.append(number)
    return numbers


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINE, min_size=1, max_size=8))
def test_random_lines_are_each_accepted_or_rejected_and_never_5xx(
    shared_stack: RunningStack, lines: list[bytes]
) -> None:
    auth = {"Authorization": f"Bearer {shared_stack.key}"}
    content = b"\n".join(lines) + b"\n"
    uploaded = httpx.post(
        f"{shared_stack.base_url}/files",
        data={"purpose": "batch"},
        files={"file": ("random.jsonl", content)},
        headers=auth,
        timeout=60,
    )
    assert uploaded.status_code == 200, uploaded.text
    answer = httpx.post(
        f"{shared_stack.base_url}/batches",
        json=from_file(uploaded.json()["id"]),
        headers=auth,
        timeout=60,
    )
    assert answer.status_code in (200, 400), answer.text
    body = answer.json()
    expected = _record_lines(lines)
    if answer.status_code == 400:
        error = body["error"]
        if not expected:
            assert error["code"] == "empty_file"
            return
        assert error["code"] == "no_valid_records"
        rejections_file, rejected_count = error["rejected_records_file_id"], error["rejected_count"]
        accepted: list[int] = []
    else:
        assert body["request_counts"]["total"] == len(expected)
        rejections_file, rejected_count = body["rejected_records_file_id"], body["rejected_count"]
        items = db_rows(
            shared_stack.database_url,
            "SELECT line, state FROM items WHERE batch_id = :b ORDER BY idx",
            b=body["id"],
        )
        assert [i.line for i in items] == expected
        accepted = [i.line for i in items if i.state != "rejected"]
        assert accepted
    rejected = []
    if rejections_file is not None:
        download = httpx.get(
            f"{shared_stack.base_url}/files/{rejections_file}/content", headers=auth, timeout=60
        )
        rejected = read_jsonl(download.content)
    assert len(rejected) == rejected_count
    assert all(r["code"] and r["message"] for r in rejected)
    assert sorted([r["line"] for r in rejected] + accepted) == expected

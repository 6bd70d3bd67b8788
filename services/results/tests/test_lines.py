"""Output/error line shapes, as OpenAI writes them, and the cost of one item."""

from __future__ import annotations

import json
from typing import Any

from batchgate.services.common.db.items import LINE_COLUMNS
from batchgate.services.common.ids import request_line_id
from batchgate.services.common.loading import load_settings
from batchgate.services.results.lines import LineRenderer
from batchgate.services.results.pricing import item_cost


def row(**values: Any) -> tuple[Any, ...]:
    base = {
        "idx": 0,
        "custom_id": "c1",
        "state": "succeeded",
        "status_code": None,
        "response": None,
        "request_id": None,
        "error_code": None,
        "error_message": None,
    }
    base.update(values)
    return tuple(base[column.name] for column in LINE_COLUMNS)


def render(batch_id: str, item: tuple[Any, ...]) -> bytes:
    return LineRenderer(batch_id).line(item)


def test_success_line_splices_the_upstream_body() -> None:
    line = json.loads(render("batch_1", row(status_code=200, response=b'{"ok":true}', request_id="req_1")))
    assert line == {
        "id": request_line_id("batch_1", 0),
        "custom_id": "c1",
        "response": {"status_code": 200, "request_id": "req_1", "body": {"ok": True}},
        "error": None,
    }


def test_line_ids_are_the_shared_request_line_ids() -> None:
    renderer = LineRenderer("batch_x")
    for index in (0, 7, 49_999):
        line = json.loads(renderer.line(row(idx=index, status_code=200, response=b"{}")))
        assert line["id"] == request_line_id("batch_x", index)
        assert line["id"].startswith("batch_req_")


def test_upstream_http_failure_keeps_the_error_under_response_body() -> None:
    body = b'{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"x"}}'
    line = json.loads(render("b", row(state="failed", status_code=400, response=body, request_id="r")))
    assert line["error"] is None
    assert line["response"]["status_code"] == 400
    assert line["response"]["body"]["error"]["message"] == "bad"


def test_non_http_failure_has_a_null_response_and_an_error_object() -> None:
    line = json.loads(render("b", row(state="expired", error_code="batch_expired", error_message="late")))
    assert line["response"] is None
    assert line["error"] == {"code": "batch_expired", "message": "late"}


def test_rejected_record_without_custom_id_prints_null() -> None:
    line = json.loads(
        render("b", row(state="rejected", custom_id=None, error_code="invalid_json_line", error_message="x"))
    )
    assert line["custom_id"] is None and line["response"] is None
    assert line["error"]["code"] == "invalid_json_line"


def test_split_separates_successes_from_every_failure_in_order() -> None:
    rows = [
        row(idx=0, status_code=200, response=b"{}"),
        row(idx=1, state="failed", status_code=500, response=b'{"error":{}}'),
        row(idx=2, state="cancelled", error_code="batch_cancelled"),
        row(idx=3, status_code=200, response=b"{}"),
    ]
    good, bad = LineRenderer("b").split(rows)
    assert [json.loads(x)["id"] for x in good] == [request_line_id("b", 0), request_line_id("b", 3)]
    assert [json.loads(x)["id"] for x in bad] == [request_line_id("b", 1), request_line_id("b", 2)]
    assert LineRenderer("b").lines(rows) == b"".join(LineRenderer("b").line(r) for r in rows)


def test_multi_line_bodies_are_compacted_so_the_file_stays_jsonl() -> None:
    text = render("b", row(status_code=200, response=b'{\n  "a": 1\n}'))
    assert text.count(b"\n") == 1 and text.endswith(b"\n")


def test_cost_uses_cached_price_and_discount() -> None:
    settings = load_settings(environ={})
    # gpt-4o-mini on the simulator: 0.15 in, 0.075 cached, 0.6 out per million
    cost = item_cost(
        settings,
        "gpt-4o-mini",
        prompt_tokens=1_000_000,
        cached_tokens=400_000,
        completion_tokens=1_000_000,
        discount=0.5,
    )
    assert abs(cost - (0.6 * 0.15 + 0.4 * 0.075 + 0.6) * 0.5) < 1e-12
    assert item_cost(settings, "unknown", 10, 0, 10, 0.0) == 0.0


def test_batch_discount_is_configurable_per_tier() -> None:
    settings = load_settings(environ={})
    assert (settings.batch_discount(0), settings.batch_discount(1)) == (0.5, 0.0)
    custom = load_settings(
        environ={"BATCHGATE_BATCH_DISCOUNT_STANDARD": "0.25", "BATCHGATE_BATCH_DISCOUNT_EXPEDITED": "0.1"}
    )
    assert (custom.batch_discount(0), custom.batch_discount(1)) == (0.25, 0.1)

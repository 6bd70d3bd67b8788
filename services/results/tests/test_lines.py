"""Output/error line shapes, as OpenAI writes them."""

from __future__ import annotations

import json
from types import SimpleNamespace

from services.common.config import load_settings
from services.results.lines import render
from services.results.pricing import item_cost


def row(**values: object) -> SimpleNamespace:
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
    return SimpleNamespace(**base)


def test_success_line_splices_the_upstream_body() -> None:
    line = json.loads(render("batch_1", row(status_code=200, response=b'{"ok":true}', request_id="req_1")))
    assert line == {
        "id": line["id"],
        "custom_id": "c1",
        "response": {"status_code": 200, "request_id": "req_1", "body": {"ok": True}},
        "error": None,
    }
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


def test_multi_line_bodies_are_compacted_so_the_file_stays_jsonl() -> None:
    text = render("b", row(status_code=200, response=b'{\n  "a": 1\n}'))
    assert text.count(b"\n") == 1 and text.endswith(b"\n")


def test_ids_are_stable_across_renders() -> None:
    assert render("b", row(status_code=200, response=b"{}")) == render(
        "b", row(status_code=200, response=b"{}")
    )


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

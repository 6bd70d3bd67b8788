"""`batchgate.tool_config` at create: defaults, clamping, and one precise rejection per mistake."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.tool_url_gate import MAX_HOSTS, ToolUrlGate
from batchgate.services.ingest.validation import Accepted, RecordChecker, Rejected

ENDPOINT = "/v1/chat/completions"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def line(config: Any, **body: Any) -> bytes:
    request = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": TOOLS,
        "batchgate": {"tool_config": config},
        **body,
    }
    return json.dumps({"custom_id": "t-1", "method": "POST", "url": ENDPOINT, "body": request}).encode()


def checker(endpoint: str = ENDPOINT, **env: str) -> RecordChecker:
    return RecordChecker(load_settings(environ={"BATCHGATE_REQUEST_TIMEOUT_S": "60", **env}), endpoint)


def stored(outcome: Accepted | Rejected) -> dict[str, Any]:
    assert isinstance(outcome, Accepted), outcome
    config: dict[str, Any] = json.loads(outcome.body)["batchgate"]["tool_config"]
    return config


def test_omitted_and_zero_fields_take_the_defaults() -> None:
    for config in (
        {"url": "https://tools.example/run"},
        {"url": "https://tools.example/run", "max_rounds": 0, "max_tokens": 0, "timeout_ms": 0},
    ):
        assert stored(checker().check(line(config))) == {
            "type": "http",
            "url": "https://tools.example/run",
            "max_rounds": 8,
            "max_tokens": 200_000,
            "timeout_ms": 30_000,
        }


def test_values_over_a_cap_are_clamped_to_it() -> None:
    config = {
        "type": "mcp",
        "url": "https://tools.example/mcp",
        "max_rounds": 99,
        "max_tokens": 10**9,
        "timeout_ms": 900_000,
    }
    got = stored(checker().check(line(config)))
    assert (got["type"], got["max_rounds"], got["max_tokens"], got["timeout_ms"]) == (
        "mcp",
        16,
        2_000_000,
        60_000,
    )


def test_whole_numbers_written_as_floats_are_integers() -> None:
    """`1e20` was refused as "must be an integer" where README lowers a value above a cap."""
    config = {"url": "https://tools.example/run", "max_rounds": 3.0, "timeout_ms": 1e20}
    got = stored(checker().check(line(config)))
    assert (got["max_rounds"], got["timeout_ms"]) == (3, 60_000)
    assert isinstance(got["max_rounds"], int)


def test_the_default_timeout_is_capped_by_a_shorter_request_time_limit() -> None:
    got = stored(checker(BATCHGATE_REQUEST_TIMEOUT_S="5").check(line({"url": "https://tools.example/run"})))
    assert got["timeout_ms"] == 5000


def test_authorization_and_context_are_kept_and_other_extension_keys_stay() -> None:
    raw = line({"url": "https://t.example/", "authorization": "Bearer s3", "context": {"user": 7}})
    body = json.loads(raw)["body"]
    body["batchgate"]["note"] = "kept"
    outcome = checker().check(
        json.dumps({"custom_id": "t-1", "method": "POST", "url": ENDPOINT, "body": body}).encode()
    )
    assert isinstance(outcome, Accepted)
    extension = json.loads(outcome.body)["batchgate"]
    assert extension["note"] == "kept"
    assert (extension["tool_config"]["authorization"], extension["tool_config"]["context"]) == (
        "Bearer s3",
        {"user": 7},
    )


@pytest.mark.parametrize(
    "config, fragment",
    [
        (None, "must be an object"),
        ("https://t.example/", "must be an object"),
        ({}, "'tool_config.url'"),
        ({"url": 7}, "'tool_config.url'"),
        ({"url": "ftp://t.example/"}, "http:// or https://"),
        ({"url": "https://"}, "no host"),
        ({"url": "https://t.example/", "type": "grpc"}, "'tool_config.type'"),
        ({"url": "https://t.example/", "max_rounds": -1}, "must not be negative"),
        ({"url": "https://t.example/", "timeout_ms": -5}, "must not be negative"),
        ({"url": "https://t.example/", "max_rounds": "3"}, "must be an integer"),
        ({"url": "https://t.example/", "max_rounds": 2.5}, "must be an integer"),
        ({"url": "https://t.example/", "timeout_ms": True}, "must be an integer"),
        ({"url": "https://t.example/", "authorization": 5}, "'tool_config.authorization'"),
        ({"url": "https://t.example/", "authorization": "a\r\nb"}, "control characters"),
        ({"url": "https://t.example/", "authorization": "Bearer a\x01b"}, "control characters"),
        ({"url": "https://t.example/", "type": False}, "'tool_config.type'"),
        ({"url": "https://t.example/", "type": ""}, "'tool_config.type'"),
        ({"url": "https://t.example/", "type": []}, "'tool_config.type'"),
        ({"url": "https://t.example/", "max_rounds": False}, "must be an integer"),
        ({"url": "https://t.example/", "max_tokens": False}, "must be an integer"),
        ({"url": "https://t.example/", "timeout_ms": []}, "must be an integer"),
        ({"url": "https://u:p@t.example/"}, "must not hold credentials"),
        ({"url": "https://t.example/", "retries": 3}, "unknown field(s) retries"),
    ],
)
def test_a_bad_tool_config_is_rejected_with_its_custom_id(config: Any, fragment: str) -> None:
    outcome = checker().check(line(config))
    assert isinstance(outcome, Rejected)
    assert (outcome.code, outcome.custom_id) == ("invalid_tool_config", "t-1")
    assert fragment in outcome.message


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"tools": None}, "non-empty 'body.tools'"),
        ({"tools": []}, "non-empty"),
        ({"n": 2}, "'body.n' must be 1"),
    ],
)
def test_the_request_around_it_must_suit_a_tool_loop(body: dict[str, Any], fragment: str) -> None:
    outcome = checker().check(line({"url": "https://t.example/"}, **body))
    assert isinstance(outcome, Rejected) and outcome.code == "invalid_tool_config"
    assert fragment in outcome.message


def test_other_endpoints_refuse_it() -> None:
    record = {
        "custom_id": "e",
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {
            "model": "gpt-4o-mini",
            "input": "x",
            "tools": TOOLS,
            "batchgate": {"tool_config": {"url": "https://t.example/"}},
        },
    }
    outcome = checker("/v1/embeddings").check(json.dumps(record).encode())
    assert isinstance(outcome, Rejected) and outcome.code == "invalid_tool_config"


def test_records_without_it_are_untouched_even_with_tools_and_other_extension_keys() -> None:
    body = {"model": "gpt-4o-mini", "messages": [], "tools": TOOLS, "batchgate": {"note": 1}}
    raw = json.dumps({"custom_id": "p", "method": "POST", "url": ENDPOINT, "body": body}).encode()
    outcome = checker().check(raw)
    assert isinstance(outcome, Accepted) and json.loads(outcome.body) == body and outcome.tool_url is None


async def test_tool_urls_obey_the_private_address_policy() -> None:
    settings = load_settings(environ={})
    gate = ToolUrlGate(settings)
    for url in (
        "http://127.0.0.1:9/run",
        "http://169.254.169.254/latest",
        "http://[::1]/x",
        "http://10.1.2.3/",
    ):
        outcome = await gate.admit(checker().check(line({"url": url})))
        assert isinstance(outcome, Rejected) and outcome.code == "invalid_tool_config", url
        assert outcome.custom_id == "t-1" and "tool servers must be at public addresses" in outcome.message
    public = await gate.admit(checker().check(line({"url": "http://93.184.215.14/run"})))
    assert isinstance(public, Accepted) and public.tool_url is None


async def test_tool_allowed_networks_defaults_to_the_webhook_list_and_can_differ() -> None:
    loopback = line({"url": "http://127.0.0.1:9/run"})
    inherits = load_settings(environ={"BATCHGATE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"})
    assert isinstance(await ToolUrlGate(inherits).admit(checker().check(loopback)), Accepted)
    public_only = dataclasses.replace(inherits, tool_allowed_networks="none")
    assert isinstance(await ToolUrlGate(public_only).admit(checker().check(loopback)), Rejected)
    own = load_settings(environ={"BATCHGATE_TOOL_ALLOWED_NETWORKS": "127.0.0.1/32"})
    assert isinstance(await ToolUrlGate(own).admit(checker().check(loopback)), Accepted)


def test_a_bad_tool_allowed_networks_setting_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="tool_allowed_networks"):
        load_settings(environ={"BATCHGATE_TOOL_ALLOWED_NETWORKS": "not-a-network"})


async def test_a_batch_names_at_most_a_hundred_tool_servers() -> None:
    gate = ToolUrlGate(load_settings(environ={"BATCHGATE_TOOL_ALLOWED_NETWORKS": "127.0.0.0/8"}))
    for n in range(MAX_HOSTS):
        same_host = await gate.admit(checker().check(line({"url": f"http://127.0.0.1:{1000 + n}/a"})))
        assert isinstance(same_host, Accepted)
    assert isinstance(
        await gate.admit(checker().check(line({"url": "http://127.0.0.1:1000/other"}))), Accepted
    )
    beyond = await gate.admit(checker().check(line({"url": "http://127.0.0.2:1000/"})))
    assert isinstance(beyond, Rejected) and "at most 100 tool servers (host and port)" in beyond.message

"""Where each model's Message Batch requests can run, and so which are refused at create."""

from __future__ import annotations

import orjson

from batchgate.services.common.catalogue import ModelConfig, ProviderConfig
from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.message_requests import MessageRequestChecker
from batchgate.services.ingest.validation import Accepted, Rejected

PROVIDERS = (
    ProviderConfig(name="claude", kind="anthropic", base_url="http://a.test/v1"),
    ProviderConfig(name="vllm", base_url="http://v.test/v1", vllm_extensions=True),
    ProviderConfig(name="ollama", base_url="http://o.test/v1"),
)
MODELS = (
    ModelConfig(name="haiku", provider="claude"),
    ModelConfig(name="llama", provider="vllm"),
    ModelConfig(name="small", provider="ollama"),
    ModelConfig(name="small-then-haiku", provider="ollama", fallbacks=("haiku",)),
    ModelConfig(name="embed", provider="ollama", endpoints=("/v1/embeddings",)),
)


def check(model: str, **extra: object) -> Accepted | Rejected:
    settings = load_settings(environ={}, providers=PROVIDERS, models=MODELS)
    params = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}], **extra}
    return MessageRequestChecker(settings).check(orjson.dumps({"custom_id": "a", "params": params}))


def test_params_that_translate_nowhere_are_refused_naming_the_field() -> None:
    assert isinstance(check("haiku", top_k=3), Accepted)  # native: as they are
    assert isinstance(check("llama", top_k=3), Accepted)  # vLLM takes top_k
    refused = check("small", top_k=3)
    assert isinstance(refused, Rejected) and refused.code == "unsupported_parameter"
    assert "'params.top_k'" in refused.message
    assert isinstance(check("small-then-haiku", top_k=3), Accepted)  # its fallback runs it natively


def test_a_model_that_serves_no_chat_is_not_offered() -> None:
    refused = check("embed")
    assert isinstance(refused, Rejected) and refused.code == "model_not_found"


def test_an_accepted_request_stores_its_params_as_the_body() -> None:
    accepted = check("haiku", temperature=0.5)
    assert isinstance(accepted, Accepted) and accepted.custom_id == "a" and accepted.model == "haiku"
    assert orjson.loads(accepted.body)["temperature"] == 0.5


def rejected_custom_id(custom_id: object) -> str | None:
    settings = load_settings(environ={}, providers=PROVIDERS, models=MODELS)
    params = {"model": "haiku", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    refused = MessageRequestChecker(settings).check(orjson.dumps({"custom_id": custom_id, "params": params}))
    assert isinstance(refused, Rejected) and refused.code.endswith("custom_id")
    return refused.custom_id


def test_a_request_refused_for_its_custom_id_keeps_it_so_its_result_matches() -> None:
    assert rejected_custom_id("x" * 65) == "x" * 65
    assert rejected_custom_id("has space") == "has space"
    assert rejected_custom_id(123) == "123"
    assert rejected_custom_id("") == ""
    assert rejected_custom_id(None) == ""


def test_a_custom_id_kept_for_a_result_fits_the_items_column() -> None:
    long = rejected_custom_id("é" * 600)
    assert long == "é" * 509 + "..." and len(long) == 512
    assert rejected_custom_id("a\x00b") == "a\ufffdb"  # PostgreSQL refuses NUL in text

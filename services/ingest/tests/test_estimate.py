"""Which tokenizer a dry run's estimate uses for a model name, what it counts of each prompt
shape, and the output it allows (README "Dry run")."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from batchgate.services.common.catalogue import ModelConfig, Price
from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.budget_holds import HoldTally
from batchgate.services.ingest.estimate import (
    PIECE_CHARS,
    Estimate,
    approximate,
    counter_for,
    input_tokens,
    pieces,
    tokenizers,
)
from batchgate.services.ingest.validation import Accepted


@pytest.mark.parametrize(
    ("names", "tokenizer"),
    [
        (("gpt-4o-mini",), "o200k_base"),
        (("GPT-4o",), "o200k_base"),
        # Known to the library's model table, refused by its `encoding_for_model`.
        (("gpt-4",), "cl100k_base"),
        (("gpt-3.5-turbo",), "cl100k_base"),
        (("text-embedding-3-small",), "cl100k_base"),
        # The upstream name first, then the public one.
        (("", "gpt-4o"), "o200k_base"),
        (("my-llama", "gpt-4"), "cl100k_base"),
        # Legacy encodings need tiktoken_ext; unknown models: the approximation.
        (("davinci",), "approximate"),
        (("llama3", "claude-haiku-4-5"), "approximate"),
    ],
)
def test_the_tokenizer_follows_the_model_name(names: tuple[str, ...], tokenizer: str) -> None:
    count, name = counter_for(*names)
    assert name == tokenizer
    text = "Estimating tokens, offline, for a batch that has not run yet."
    if tokenizer == "approximate":
        assert count is approximate
    else:
        assert 0 < count(text) < approximate(text) * 2


@pytest.mark.parametrize(
    "text",
    [
        "hello world " * 83_334,  # 1,000,008 characters: the library refuses a million
        "x" * 10 * 1024 * 1024,  # a 10 MiB record, no space to cut at
        "1 2 3 4 5 6 7 8 9 " * 50_000,  # 900,000 characters but 900,000 tokens: over 200,000
    ],
)
def test_long_texts_are_counted_in_pieces_not_refused(text: str) -> None:
    count, name = counter_for("gpt-4o-mini")
    assert name == "o200k_base"
    whole_pieces = pieces(text)
    assert "".join(whole_pieces) == text and max(map(len, whole_pieces)) <= PIECE_CHARS
    encoding = tokenizers().get_encoding("o200k_base")
    assert count(text) == sum(len(encoding.encode_ordinary(p)) for p in pieces(text, 40_000))


def test_a_cut_falls_before_a_space_so_the_count_is_the_whole_texts() -> None:
    count, _ = counter_for("gpt-4o")
    # 756,000 characters, 192,000 tokens: within the library's limits, so it counts it whole.
    text = "Estimating tokens, offline, for a batch that has not run yet. " * 12_000
    assert count(text) == len(tokenizers().get_encoding("o200k_base").encode_ordinary(text))


def test_every_prompt_field_is_counted() -> None:
    count, _ = counter_for("gpt-4o")
    body = {"instructions": "be brief", "input": "hi", "suffix": "# end", "prompt": "def f():"}
    assert input_tokens(count, body) == sum(
        count(text) for text in ("be brief", "# end", "def f():")
    ) + input_tokens(count, {"input": "hi"})


HELLO_PART = {"type": "text", "text": "hello"}
HI_MESSAGE = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        # The baseline: 3 to prime the answer, 3 for the message, "user" and "hello" a token each.
        ({"messages": [{"role": "user", "content": "hello"}]}, 8),
        # Embeddings' `input` and completions' `prompt` are texts or token ids, not messages: no
        # framing, and a token id is one token, never its JSON text.
        ({"input": ["hello"] * 100}, 100),
        ({"input": [15339] * 1000}, 1000),
        ({"input": [[15339] * 500] * 2}, 1000),
        ({"prompt": [15339] * 1000}, 1000),
        ({"prompt": ["Say hi", "Say hi"]}, 4),
        # A content of parts counts its parts' text, as the plain string does.
        ({"messages": [{"role": "user", "content": [HELLO_PART]}]}, 8),
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]}, 8),
    ],
)
def test_prompts_count_their_text_token_ids_and_message_framing(body: dict[str, Any], tokens: int) -> None:
    count, name = counter_for("gpt-4o-mini")
    assert name == "o200k_base" and count("hello") == 1 and count("Say hi") == 2
    assert input_tokens(count, body) == tokens


@pytest.mark.parametrize(
    ("endpoint", "body", "allowed"),
    [
        ("/v1/completions", {"prompt": ["hello"] * 100, "max_tokens": 10}, 1000),
        ("/v1/chat/completions", {"n": 5, "max_tokens": 10, "messages": [HI_MESSAGE]}, 50),
    ],
)
def test_the_output_bound_counts_every_answer_billed(
    endpoint: str, body: dict[str, Any], allowed: int
) -> None:
    estimate = Estimate(load_settings(environ={}), endpoint)
    request = {"model": "gpt-4o-mini", **body}
    estimate.add(Accepted("a", orjson.dumps(request), "gpt-4o-mini", request=request))
    assert estimate.max_output_tokens == allowed


@pytest.mark.parametrize("loop", ["tool_config", "workflow"])
def test_a_loop_record_is_bounded_by_its_max_tokens_as_its_hold_is(loop: str) -> None:
    """A tool record's estimate counted one call: `cost_max` $0.000136 where it spent $0.0034."""
    settings = load_settings(environ={})
    price = settings.model("gpt-4o-mini").price  # type: ignore[union-attr]
    estimate = Estimate(settings, "/v1/chat/completions")
    config = {"url": "https://tools.example/", "max_tokens": 20_000}
    request = {
        "model": "gpt-4o-mini",
        "max_tokens": 100,
        "messages": [HI_MESSAGE],
        "batchgate": {loop: config},
    }
    estimate.add(Accepted("a", orjson.dumps(request), "gpt-4o-mini", request=request))
    assert estimate.max_output_tokens == 20_000
    higher = max(price.input_per_mtok, price.output_per_mtok)
    assert estimate.gross_max == pytest.approx(20_000 * higher / 1e6)
    assert estimate.gross_min == pytest.approx(estimate.input_tokens * price.input_per_mtok / 1e6)


def test_the_hold_and_cost_max_price_a_dearer_fallback() -> None:
    """A batch that fell back to its model's dearer fallback spent seven times its hold."""
    settings = load_settings(environ={})
    cheap, dear = (
        Price(input_per_mtok=0.15, output_per_mtok=0.6),
        Price(input_per_mtok=2.5, output_per_mtok=10.0),
    )
    settings = dataclasses.replace(
        settings,
        models=(
            ModelConfig(name="mini", provider=settings.models[0].provider, price=cheap, fallbacks=("big",)),
            ModelConfig(name="big", provider=settings.models[0].provider, price=dear),
        ),
    )
    request = {"model": "mini", "max_tokens": 100, "messages": [HI_MESSAGE]}
    accepted = Accepted("a", orjson.dumps(request), "mini", request=request)
    holds = HoldTally(settings, discount=0.0)
    holds.add(accepted)
    estimate = Estimate(settings, "/v1/chat/completions")
    estimate.add(accepted)
    worst = (estimate.input_tokens * dear.input_per_mtok + 100 * dear.output_per_mtok) / 1e6
    assert estimate.gross_max == pytest.approx(worst)
    assert estimate.gross_min == pytest.approx(estimate.input_tokens * cheap.input_per_mtok / 1e6)
    assert holds.usd >= 100 * dear.output_per_mtok / 1e6  # its output at the fallback's price

"""Which tokenizer a dry run's estimate uses for a model name (README "Dry run")."""

from __future__ import annotations

import pytest

from batchgate.services.ingest.estimate import approximate, counter_for


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

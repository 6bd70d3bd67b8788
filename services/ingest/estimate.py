"""Token and cost estimates of a batch before it runs (the dry run's `estimate`).

Input tokens are counted with OpenAI's own tokenizers where the model's is known offline:
`bpe-openai` bundles `o200k_base` and `cl100k_base` in its wheel and maps OpenAI model names
to them (tiktoken would download its BPE files on first use). The name is looked up in its
model table and the encoding loaded by name: its `encoding_for_model` refuses with a bare
`ValueError` models that table knows but its Rust side does not (`gpt-4`, `gpt-3.5-turbo`,
the embedding models), and the legacy GPT-2/GPT-3 encodings need `tiktoken_ext`, so those
models get the approximation. The model's upstream name is tried, then its public name.
Chat messages, and the Responses API's `input` items, are counted the way OpenAI's cookbook
does (3 tokens per message, 1 per name, 3 to prime the answer); the other prompt fields
(`record_texts`: `system`, `instructions`, `prompt`, `suffix`, and embeddings' `input`) as the
text in them, with no framing; token ids (embeddings and completions take lists of them) a
token each; and `tools`, `response_format` and other structured parts as their compact JSON
text. Text is where `record_texts` says it lives: a content of parts or blocks counts the text
of its text parts (`TEXT_KEYS`), not their JSON nor their `type`, and a part with no text (an
image) counts nothing. Long texts, which the tokenizer refuses (1,000,000 characters, or
over 200,000 tokens), are counted in pieces (`PIECE_CHARS`). Any other model (Anthropic,
local models, names the table lacks) gets the documented approximation of one token per 4
UTF-8 bytes of text.

Output tokens are bounded, not predicted: each request's `max_completion_tokens`,
`max_tokens` or `max_output_tokens`, else its provider's `default_max_tokens`; embeddings
produce none. A record that calls tools or runs a workflow makes many calls, each reading the
last ones' output: its bound is its loop's `max_tokens` (prompt and completion over all its
calls), priced as its budget hold prices it. So `cost_min` prices the first call's input alone
and `cost_max` the input plus every output token allowed, both after the batch discount.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from types import ModuleType
from typing import Any

import orjson

from batchgate.services.common.catalogue import ModelConfig
from batchgate.services.common.config import Settings
from batchgate.services.common.record_texts import MESSAGE_FIELDS, PROMPT_FIELDS, TEXT_KEYS, structured_json
from batchgate.services.common.token_usage import output_allowance
from batchgate.services.ingest.budget_holds import loop_tokens, worst_price
from batchgate.services.ingest.validation import Accepted

BYTES_PER_TOKEN = 4  # the approximation where no tokenizer is known
BUNDLED_ENCODINGS = ("o200k_base", "cl100k_base")
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
PER_MILLION = 1_000_000
NO_OUTPUT_ENDPOINTS = ("/v1/embeddings",)
PIECE_CHARS = 50_000
"""Longer texts are tokenized in pieces of at most this many characters: a character is at
most 4 UTF-8 bytes, so at most 4 tokens, and a piece stays within the tokenizer's limit of
200,000 tokens (and 1,000,000 characters) a call."""
PIECE_CUT_WINDOW = 1_000
"""How far back from a piece's end a space is looked for to cut at."""

Counter = Callable[[str], int]


def approximate(text: str) -> int:
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)


def tokenizers() -> ModuleType:
    """`bpe_openai`, imported on first use: its import builds its model table (0.6-0.8 s of CPU
    here), which used to hold up every ingest process's start. The ingest server calls this
    once in a thread as it starts (`warm_tokenizers`), so a dry run rarely waits for it."""
    return importlib.import_module("bpe_openai")


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """`text` cut into pieces of at most `size` characters, each cut made before a space near
    its end where there is one (where a word starts: a cut there seldom changes the count)."""
    out = []
    start = 0
    while len(text) - start > size:
        end = start + size
        space = text.rfind(" ", end - PIECE_CUT_WINDOW, end)
        end = space if space > start else end
        out.append(text[start:end])
        start = end
    out.append(text[start:])
    return out


@cache
def _counter(encoding: str) -> Counter:
    """Loading an encoding costs 35-125 ms each time (the library does not keep it). The
    library refuses (ValueError) a text of 1,000,000 characters or more and one of more than
    200,000 tokens, so longer texts are counted in pieces (`PIECE_CHARS`, at most 4 tokens a
    character); should it refuse a piece anyway, that piece gets the approximation."""
    encode = tokenizers().get_encoding(encoding).encode_ordinary

    def count(text: str) -> int:
        total = 0
        for piece in pieces(text) if len(text) > PIECE_CHARS else (text,):
            try:
                total += len(encode(piece))
            except ValueError:  # TokenLimitError is one too
                total += approximate(piece)
        return total

    return count


def _bundled_encoding(model: str) -> str | None:
    """The name of `model`'s OpenAI encoding, where it is one bundled in the wheel."""
    try:
        encoding: str = tokenizers().compat.get_metadata(model).encoding
    except KeyError:
        return None
    return encoding if encoding in BUNDLED_ENCODINGS else None


@lru_cache(maxsize=64)
def counter_for(*names: str) -> tuple[Counter, str]:
    """(token counter, tokenizer name) for the first of `names` with a known OpenAI tokenizer,
    else the approximation (`approximate`)."""
    for name in names:
        if name and (encoding := _bundled_encoding(name)) is not None:
            return _counter(encoding), encoding
    return approximate, "approximate"


def warm_tokenizers() -> None:
    """Import the tokenizer library and load the bundled encodings (run in a thread)."""
    for encoding in BUNDLED_ENCODINGS:
        _counter(encoding)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _text_tokens(count: Counter, value: Any) -> int:
    """Tokens of the text in a prompt value, where `record_texts` says text lives: a string; an
    integer, a token id (embeddings and completions take lists of them), one token, where its
    JSON text counted 2 or more; a list of these at any depth (texts, token-id lists); the
    `TEXT_KEYS` of a part, block or item (an object with `role` or `type`). A part's `type` and
    ids are not text, and counting parts as JSON made a "hello" text part 11 tokens more than
    the string; a part without text (an image) counts nothing. Loops, not generators: a
    token-id list may hold thousands of entries."""
    if isinstance(value, str):
        return count(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return 1
    total = 0
    if isinstance(value, list):
        for entry in value:
            total += _text_tokens(count, entry)
    elif isinstance(value, dict) and ("role" in value or "type" in value):
        for key in TEXT_KEYS:
            if key in value:
                total += _text_tokens(count, value[key])
    return total


def _message_tokens(count: Counter, message: Any) -> int:
    """One chat message or Responses item as the cookbook counts it: its framing, and each of
    its values, its text keys' as their text (`_text_tokens`), a name with a token more, the
    others (role, tool_call_id, tool_calls) as their text or compact JSON, as billed."""
    if not isinstance(message, dict):
        return TOKENS_PER_MESSAGE + _text_tokens(count, message)
    total = TOKENS_PER_MESSAGE
    for key, value in message.items():
        if key in TEXT_KEYS:
            total += _text_tokens(count, value)
        else:
            total += count(_text(value)) + (TOKENS_PER_NAME if key == "name" else 0)
    return total


def _is_message_list(value: Any) -> bool:
    """Whether a `MESSAGE_FIELDS` value is a list of messages or items (objects): the same
    field name, `input`, holds embeddings' texts and token ids, which are not messages and
    have no framing (a list of 100 texts was counted 303 tokens too many)."""
    return isinstance(value, list) and any(isinstance(entry, dict) for entry in value)


def input_tokens(count: Counter, body: dict[str, Any]) -> int:
    """Prompt tokens of one request body, whatever its endpoint."""
    total = 0
    for key in PROMPT_FIELDS:
        if key not in body:
            continue
        value = body[key]
        if key in MESSAGE_FIELDS and _is_message_list(value):
            total += REPLY_PRIMING_TOKENS
            for message in value:
                total += _message_tokens(count, message)
        else:
            total += _text_tokens(count, value)
    for text in structured_json(body):
        total += count(text.decode())
    return total


@dataclass
class Estimate:
    """Running totals over a batch's accepted records."""

    settings: Settings
    endpoint: str
    input_tokens: int = 0
    max_output_tokens: int = 0
    gross_min: float = 0.0
    """The input's cost at list price; the discount is applied once the batch's execution (so
    its discount) is known, after every record (a native batch's is its provider's)."""
    gross_max: float = 0.0
    tokenizer: str = ""

    def add(self, record: Accepted) -> None:
        model = record.model
        config = self.settings.model(model)
        upstream = config.upstream_model if config else ""
        count, self.tokenizer = counter_for(upstream, model)
        request = record.request
        prompt = input_tokens(count, request)
        output = 0 if self.endpoint in NO_OUTPUT_ENDPOINTS else self._output_limit(request, config)
        loop = loop_tokens(request)
        if loop is not None:  # a tool loop or workflow: its calls are bounded by its max_tokens alone
            output = loop
        self.input_tokens += prompt
        self.max_output_tokens += output
        if config is not None:
            self.gross_min += prompt * config.price.input_per_mtok / PER_MILLION
            price = worst_price(self.settings, config)  # a fallback may answer: as the hold prices it
            if loop is not None:  # as its budget hold prices it
                gross = loop * max(price.input_per_mtok, price.output_per_mtok)
            else:
                gross = prompt * price.input_per_mtok + output * price.output_per_mtok
            self.gross_max += gross / PER_MILLION

    def _output_limit(self, request: dict[str, Any], config: ModelConfig | None) -> int:
        provider = self.settings.provider(config.provider) if config is not None else None
        return output_allowance(request, int(provider.default_max_tokens) if provider is not None else 0)

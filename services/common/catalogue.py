"""The provider and model catalogue: what the executor calls, and which public model names are
offered, from the YAML file's `providers:`, `models:` and `retry:` (or, without providers, the
built-in simulator's). Parsed and checked once, by `batchgate.services.common.loading.load_settings`:
`${VAR}` in any string is read from the environment (`expand_env`), and an unknown key, a missing
name, a value of the wrong type or out of range is a ValueError naming the entry and the key.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from batchgate.services.common.states import Execution

SUPPORTED_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses")
# Models on an Anthropic provider serve chat completions only (translated to Messages).
ANTHROPIC_ENDPOINTS = ("/v1/chat/completions",)
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
SIMULATED_PROVIDER = "simulated"
PROVIDER_KINDS = ("openai", "anthropic")
EXECUTE = Execution.EXECUTE
NATIVE = Execution.NATIVE
BATCH_MODES = (EXECUTE, NATIVE)
_Config = TypeVar("_Config")  # the dataclasses a YAML mapping becomes
CATALOGUE_KEYS = ("retry", "providers", "models")  # the YAML keys this module reads


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for transient upstream failures (429, 5xx, timeouts, connection errors)."""

    initial_interval_s: float = 1.0
    """Wait before the first retry."""
    backoff_coefficient: float = 2.0
    """Each wait is the previous one times this."""
    max_interval_s: float = 60.0
    """No wait is longer than this (a longer `Retry-After` is honoured, up to the time limit)."""
    max_attempts: int = 5
    """Upstream calls per model before its fallback (if any) is tried."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens, before the batch discount."""

    input_per_mtok: float = 0.0
    cached_input_per_mtok: float | None = None
    output_per_mtok: float = 0.0


@dataclass(frozen=True)
class ProviderConfig:
    """One upstream: an OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) or Anthropic."""

    name: str
    """What models name in their `provider`; unique among the providers."""
    kind: str = "openai"
    """`openai` (OpenAI-compatible HTTP API) or `anthropic` (Messages API)."""
    base_url: str = ""
    """Up to and including the version segment, e.g. `https://api.openai.com/v1`; a provider
    without one, or with credentials in it (`user:password@`: use `api_key`), is refused at
    startup."""
    api_keys: tuple[str, ...] = ()
    """Key pool, used round-robin, skipping a key while it rests after a 429 (`api_key:` for a
    single key); write `${ENV_VAR}` to keep a key out of the file."""
    max_concurrency: int = 64
    """Requests in flight to this provider per executor process (the adaptive limit's ceiling)."""
    min_concurrency: int = 1
    """The adaptive limit's floor."""
    adaptive_concurrency: bool = True
    """Find the provider's capacity from its 429s and stay just below it (else: always
    `max_concurrency`)."""
    requests_per_minute: int = 0
    """Budget per key for the whole deployment, however many executors share it; 0: none."""
    tokens_per_minute: int = 0
    """Token budget per key (prompt estimate + max tokens, corrected by usage); 0: none."""
    rate_limit_cooldown_s: float = 5.0
    """A key whose window the provider reports spent (`x-ratelimit-remaining-*: 0`) without a
    reset time rests this long."""
    timeout_s: float | None = None
    """Per-request time limit; defaults to the global `request_timeout_s`."""
    anthropic_version: str = "2023-06-01"
    """`anthropic-version` header sent to a provider of kind `anthropic`."""
    default_max_tokens: int = 4096
    """`max_tokens` sent to Anthropic when a request sets neither `max_tokens` nor
    `max_completion_tokens` (Anthropic requires one)."""
    batch_api: bool = False
    """The provider has its own batch API (OpenAI's `/v1/batches`, Anthropic's Message
    Batches) that batches may be passed through to, on this provider's first key."""
    batch_mode: str = EXECUTE
    """How its models' batches run unless the model or the batch says otherwise: `execute`
    (request by request, results as they come) or `native` (the provider's batch API)."""
    batch_limit: int = 50_000
    """Requests per provider batch; a larger batch is split and joined back in input order."""
    batch_discount: float = 0.5
    """Discount off the model's price for a natively run batch (the provider's batch price)."""
    max_tokens_field: str = "max_tokens"
    """Where a Message Batch request's `max_tokens` goes on a provider of kind `openai`:
    `max_tokens` (vLLM, Ollama, llama.cpp) or `max_completion_tokens` (OpenAI's reasoning
    models refuse `max_tokens`)."""
    vllm_extensions: bool = False
    """The provider (kind `openai`) takes vLLM's extra chat parameters, so Message Batch requests
    may use `top_k` and a prefilled final assistant turn there."""


@dataclass(frozen=True)
class ModelConfig:
    """A public model name and where it runs."""

    name: str
    """What users put in `body.model`; unique among the models."""
    provider: str
    upstream_model: str = ""
    """The provider's own name for it; defaults to `name`."""
    fallbacks: tuple[str, ...] = ()
    """Public model names tried in order once this one's retries are spent."""
    price: Price = Price()
    endpoints: tuple[str, ...] = ()
    """Endpoints this model serves; empty means every supported endpoint."""
    batch_mode: str = ""
    """`execute` or `native`; empty: the provider's `batch_mode`."""
    hold_max_tokens: int = 4096
    """Output tokens a budget hold assumes for a record that sets no `max_tokens` (the
    model's output limit is the safe value)."""

    @property
    def served_endpoints(self) -> tuple[str, ...]:
        """The endpoints a batch using this model may target."""
        return self.endpoints or SUPPORTED_ENDPOINTS


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")  # lower-cased


def expand_env(value: Any, environ: Mapping[str, str], where: str) -> Any:
    """`value` with `${VAR}` in every string (of its lists and mappings too) read from `environ`;
    `${VAR:-default}` gives `default` when VAR is unset or empty. An unset VAR without a default
    is a ValueError naming it and `where` it was met."""
    if isinstance(value, list):
        return [expand_env(v, environ, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: expand_env(v, environ, f"{where}.{k}") for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def read(ref: re.Match[str]) -> str:
        name, default = ref.group(1), ref.group(2)
        if default is not None:
            return environ.get(name) or default
        if name not in environ:
            raise ValueError(
                f"{where}: environment variable {name} is not set (write ${{{name}:-…}} for a default)"
            )
        return environ[name]

    return _ENV_REF.sub(read, value)


def _number(value: Any, type_name: str, where: str) -> int | float:
    cast = int if type_name == "int" else float
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        if cast is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        return cast(value.strip() if isinstance(value, str) else value)
    except ValueError:
        kind = "an integer" if cast is int else "a number"
        raise ValueError(f"{where} must be {kind}, not {value!r}") from None


def _typed(value: Any, type_name: str, where: str) -> Any:
    """A YAML value (its `${VAR}`s expanded) as the field's annotated type, or a ValueError."""
    if type_name.endswith(" | None"):
        return None if value is None else _typed(value, type_name.removesuffix(" | None"), where)
    if type_name == "Price":
        return _build(Price, {} if value is None else value, where, environ=None)
    if type_name == "tuple[str, ...]":
        if value is not None and not isinstance(value, list | tuple):
            raise ValueError(f"{where} must be a list, e.g. [{value}], not {value!r}")
        return tuple(_typed(v, "str", f"{where}[{i}]") for i, v in enumerate(value or ()))
    if type_name in ("int", "float"):
        return _number(value, type_name, where)
    if type_name == "bool":
        text = str(value).strip().lower()
        if text not in _TRUE + _FALSE:
            raise ValueError(f"{where} must be true or false, not {value!r}")
        return text in _TRUE
    if isinstance(value, bool) or not isinstance(value, str | int | float | datetime.date):
        raise ValueError(f"{where} must be text, not {value!r}")
    return str(value)  # a number or an unquoted date (anthropic_version: 2023-06-01) as written


def _build(
    cls: type[_Config], raw: Any, where: str, environ: Mapping[str, str] | None, *also: str
) -> _Config:
    """`cls` from one YAML mapping: unknown keys, a missing required key and a value of the wrong
    type are ValueErrors naming `where` and the key; `${VAR}`s are expanded unless `environ` is
    None (already done). `also`: keys the caller has translated, named among the known ones."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    known = [*(f.name for f in fields), *also]
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping with keys {', '.join(known)}; not {raw!r}")
    if unknown := sorted(str(key) for key in raw if key not in known):
        raise ValueError(f"{where}: unknown keys {unknown} (known: {', '.join(known)})")
    values: dict[str, Any] = {}
    for f in fields:
        if f.name in raw:
            value = raw[f.name] if environ is None else expand_env(raw[f.name], environ, f"{where}: {f.name}")
            values[f.name] = _typed(value, str(f.type), f"{where}: {f.name}")
        elif f.default is dataclasses.MISSING:
            raise ValueError(f"{where}: {f.name} is required")
    return cls(**values)


def _entries(doc: Mapping[str, Any], key: str, environ: Mapping[str, str]) -> list[tuple[str, Any]]:
    """The entries of a `providers:` or `models:` list, each with what errors call it: `model m1`,
    or `models[0]` while it has no name."""
    entries = doc.get(key) or []
    if not isinstance(entries, list):
        raise ValueError(f"{key}: expected a list, not {entries!r}")
    named = []
    for i, raw in enumerate(entries):
        name = raw.get("name") if isinstance(raw, Mapping) else None
        name = expand_env(name, environ, f"{key}[{i}]: name")
        named.append((f"{key.removesuffix('s')} {name}" if name else f"{key}[{i}]", raw))
    return named


def _provider(raw: Any, where: str, environ: Mapping[str, str]) -> ProviderConfig:
    if isinstance(raw, Mapping) and "api_key" in raw:
        if "api_keys" in raw:
            raise ValueError(f"{where}: give api_keys or api_key, not both")
        raw = {**{k: v for k, v in raw.items() if k != "api_key"}, "api_keys": [raw["api_key"]]}
    return _build(ProviderConfig, raw, where, environ, "api_key")


def parse_catalogue(doc: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The catalogue keys of a YAML document, as `Settings` fields (only those it sets); a key
    the entry's class lacks, a missing `name` or a value of the wrong type is a ValueError."""
    out: dict[str, Any] = {}
    if "retry" in doc:
        out["retry"] = _build(RetryPolicy, doc["retry"], "retry", environ)
    providers = tuple(_provider(raw, where, environ) for where, raw in _entries(doc, "providers", environ))
    models = tuple(
        _build(ModelConfig, raw, where, environ) for where, raw in _entries(doc, "models", environ)
    )
    if providers:
        out["providers"] = providers
    if models:
        out["models"] = models
    return out


def simulated_catalogue(
    simulator_host: str, simulator_port: int
) -> tuple[tuple[ProviderConfig, ...], tuple[ModelConfig, ...]]:
    """Providers/models used when no YAML names any: everything runs on `batchgate simulate`."""
    base = f"http://{simulator_host}:{simulator_port}"
    providers = (
        ProviderConfig(name=SIMULATED_PROVIDER, kind="openai", base_url=f"{base}/v1", api_keys=("sim",)),
        ProviderConfig(
            name="simulated-anthropic", kind="anthropic", base_url=f"{base}/v1", api_keys=("sim",)
        ),
    )
    cheap = Price(input_per_mtok=0.15, cached_input_per_mtok=0.075, output_per_mtok=0.6)
    models = (
        ModelConfig(name="gpt-4o-mini", provider=SIMULATED_PROVIDER, price=cheap),
        ModelConfig(
            name="gpt-4o",
            provider=SIMULATED_PROVIDER,
            price=Price(input_per_mtok=2.5, cached_input_per_mtok=1.25, output_per_mtok=10.0),
        ),
        ModelConfig(
            name="text-embedding-3-small",
            provider=SIMULATED_PROVIDER,
            price=Price(input_per_mtok=0.02),
            endpoints=("/v1/embeddings",),
        ),
        ModelConfig(
            name="claude-haiku-4-5",
            provider="simulated-anthropic",
            price=Price(input_per_mtok=1.0, cached_input_per_mtok=0.1, output_per_mtok=5.0),
            endpoints=ANTHROPIC_ENDPOINTS,
        ),
    )
    return providers, models


def _check_provider(p: ProviderConfig) -> None:
    if not p.name:
        raise ValueError("providers: a provider's name must not be empty")
    if not p.base_url:
        raise ValueError(f"provider {p.name}: base_url is required (e.g. https://api.openai.com/v1)")
    url = urlsplit(p.base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(
            f"provider {p.name}: base_url must be an http(s) URL, e.g. https://api.openai.com/v1"
        )
    if url.username is not None or url.password is not None:  # the client refuses them with a key's header
        raise ValueError(
            f"provider {p.name}: base_url must not hold credentials (user:password@); use api_key"
        )
    if p.kind not in PROVIDER_KINDS:
        raise ValueError(f"provider {p.name}: kind must be openai or anthropic, not {p.kind!r}")
    if not 1 <= p.min_concurrency <= p.max_concurrency:
        raise ValueError(f"provider {p.name}: need 1 <= min_concurrency <= max_concurrency")
    if p.requests_per_minute < 0 or p.tokens_per_minute < 0 or p.rate_limit_cooldown_s < 0:
        raise ValueError(f"provider {p.name}: budgets and cool-down must not be negative")
    if p.default_max_tokens < 1:
        raise ValueError(f"provider {p.name}: default_max_tokens must be at least 1")
    if p.batch_mode not in BATCH_MODES or (p.batch_mode == NATIVE and not p.batch_api):
        raise ValueError(f"provider {p.name}: batch_mode must be execute, or native with batch_api")
    if p.batch_limit < 1 or not 0 <= p.batch_discount <= 1:
        raise ValueError(f"provider {p.name}: need batch_limit >= 1 and 0 <= batch_discount <= 1")
    if p.max_tokens_field not in MAX_TOKENS_FIELDS:
        raise ValueError(f"provider {p.name}: max_tokens_field must be one of {', '.join(MAX_TOKENS_FIELDS)}")


def _check_model(m: ModelConfig) -> None:
    if not m.name:
        raise ValueError("models: a model's name must not be empty")
    for endpoint in m.endpoints:
        if endpoint not in SUPPORTED_ENDPOINTS:
            raise ValueError(
                f"model {m.name}: endpoint {endpoint!r} is not one batchgate serves "
                f"({', '.join(SUPPORTED_ENDPOINTS)})"
            )
    for field in dataclasses.fields(Price):
        value = getattr(m.price, field.name)
        if value is not None and not value >= 0:  # NaN too
            raise ValueError(f"model {m.name}: price.{field.name} must be ≥ 0, not {value!r}")
    if m.hold_max_tokens < 1:
        raise ValueError(f"model {m.name}: hold_max_tokens must be at least 1")


def _check_retry(retry: RetryPolicy) -> None:
    if retry.max_attempts < 1 or retry.backoff_coefficient < 1:
        raise ValueError("retry: max_attempts and backoff_coefficient must be at least 1")
    if retry.initial_interval_s < 0 or retry.max_interval_s < 0:
        raise ValueError("retry: intervals must not be negative")
    if retry.max_interval_s < retry.initial_interval_s:
        raise ValueError(
            f"retry: max_interval_s ({retry.max_interval_s:g}) must not be below "
            f"initial_interval_s ({retry.initial_interval_s:g})"
        )


def check_catalogue(
    *, retry: RetryPolicy, providers: tuple[ProviderConfig, ...], models: tuple[ModelConfig, ...]
) -> tuple[ModelConfig, ...]:
    """Refuse an inconsistent catalogue (ValueError); returns the models with the endpoints
    each really serves (a model on an Anthropic provider serves chat completions only)."""
    _check_retry(retry)
    for kind, entries in (("provider", providers), ("model", models)):
        seen = [entry.name for entry in entries]
        if twice := sorted({name for name in seen if seen.count(name) > 1}):
            raise ValueError(f"{kind} names must be unique; more than one {kind} is named {twice}")
    names = {p.name for p in providers}
    for p in providers:
        _check_provider(p)
    offered = {m.name for m in models}
    for m in models:
        _check_model(m)
        if m.provider not in names:
            raise ValueError(f"model {m.name}: unknown provider {m.provider!r}")
        for fb in m.fallbacks:
            if fb not in offered:
                raise ValueError(f"model {m.name}: unknown fallback {fb!r}")
        if m.batch_mode not in ("", *BATCH_MODES):
            raise ValueError(f"model {m.name}: batch_mode must be execute or native")
        if m.batch_mode == NATIVE and not next(p for p in providers if p.name == m.provider).batch_api:
            raise ValueError(f"model {m.name}: batch_mode native needs a provider with batch_api")
    return _anthropic_endpoints(providers, models)


def _anthropic_endpoints(
    providers: tuple[ProviderConfig, ...], models: tuple[ModelConfig, ...]
) -> tuple[ModelConfig, ...]:
    kinds = {p.name: p.kind for p in providers}
    served = []
    for m in models:
        if kinds.get(m.provider) == "anthropic":
            if set(m.endpoints) - set(ANTHROPIC_ENDPOINTS):
                raise ValueError(f"model {m.name}: an anthropic provider serves only {ANTHROPIC_ENDPOINTS}")
            m = dataclasses.replace(m, endpoints=ANTHROPIC_ENDPOINTS)
        served.append(m)
    return tuple(served)

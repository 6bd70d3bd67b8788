"""Every setting, limit and default of batchgate, in one place.

Values come from, in rising precedence: the defaults below, an optional YAML file
(`--config FILE` or `BATCHGATE_CONFIG`; keys are the field names), and `BATCHGATE_*`
environment variables (each field's `env`). README.md's configuration table lists the same
fields; `tests/unit/test_config.py` keeps the two in step.

Providers and models (what the executor calls, and which public model names are offered)
come only from the YAML file; without one, every model is served by the built-in simulator.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MIB = 1024 * 1024


def _setting(default: Any, env: str, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc})


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
    """What models name in their `provider`."""
    kind: str = "openai"
    """`openai` (OpenAI-compatible HTTP API) or `anthropic` (Messages API)."""
    base_url: str = ""
    """Up to and including the version segment, e.g. `https://api.openai.com/v1`."""
    api_keys: tuple[str, ...] = ()
    """Key pool, used round-robin, skipping a key while it rests after a 429; `${ENV_VAR}`
    references are expanded (`api_key:` for a single key)."""
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


@dataclass(frozen=True)
class ModelConfig:
    """A public model name and where it runs."""

    name: str
    """What users put in `body.model`."""
    provider: str
    upstream_model: str = ""
    """The provider's own name for it; defaults to `name`."""
    fallbacks: tuple[str, ...] = ()
    """Public model names tried in order once this one's retries are spent."""
    price: Price = Price()
    endpoints: tuple[str, ...] = ()
    """Endpoints this model serves; empty means every supported endpoint."""

    @property
    def served_endpoints(self) -> tuple[str, ...]:
        """The endpoints a batch using this model may target."""
        return self.endpoints or SUPPORTED_ENDPOINTS


LOG_FORMATS = ("auto", "json", "text")
SUPPORTED_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses")
SIMULATED_PROVIDER = "simulated"


@dataclass(frozen=True)
class Settings:
    """Process-wide configuration. Build with `load_settings()`."""

    # --- where things live -------------------------------------------------------------
    data_dir: str = _setting(
        "./data", "BATCHGATE_DATA_DIR", "Directory for the SQLite database, generated Envoy config and logs."
    )
    database_url: str = _setting(
        "",
        "BATCHGATE_DATABASE_URL",
        "SQLAlchemy async URL. Empty: SQLite at `<data_dir>/batchgate.db`. "
        "PostgreSQL: `postgresql+asyncpg://user@host:5432/db`.",
    )
    # --- network -----------------------------------------------------------------------
    host: str = _setting("127.0.0.1", "BATCHGATE_HOST", "Address every service and Envoy bind to.")
    port: int = _setting(8080, "BATCHGATE_PORT", "Envoy's port: REST (OpenAI API) and native gRPC.")
    envoy_admin_port: int = _setting(9901, "BATCHGATE_ENVOY_ADMIN_PORT", "Envoy's admin interface.")
    envoy_admin_host: str = _setting(
        "127.0.0.1",
        "BATCHGATE_ENVOY_ADMIN_HOST",
        "Address Envoy's admin interface binds to. It can stop Envoy and read its state: keep it "
        "on loopback (or a management network).",
    )
    ingest_port: int = _setting(50051, "BATCHGATE_INGEST_PORT", "Ingest service gRPC port.")
    scheduler_port: int = _setting(50052, "BATCHGATE_SCHEDULER_PORT", "Scheduler service gRPC port.")
    results_port: int = _setting(50053, "BATCHGATE_RESULTS_PORT", "Results service gRPC port.")
    executor_port: int = _setting(
        50054,
        "BATCHGATE_EXECUTOR_PORT",
        "First executor's gRPC port (status, health); executor N uses port+N.",
    )
    ingest_addrs: str = _setting(
        "",
        "BATCHGATE_INGEST_ADDRS",
        "Comma-separated host:port of ingest replicas (Envoy's cluster; the scheduler's recurring-batch "
        "runs). Empty: `127.0.0.1:<ingest_port>`.",
    )
    scheduler_addrs: str = _setting(
        "",
        "BATCHGATE_SCHEDULER_ADDRS",
        "Comma-separated host:port of scheduler replicas. Empty: `127.0.0.1:<scheduler_port>`.",
    )
    results_addrs: str = _setting(
        "",
        "BATCHGATE_RESULTS_ADDRS",
        "Comma-separated host:port of results replicas. Empty: `127.0.0.1:<results_port>`.",
    )
    # --- internal TLS ------------------------------------------------------------------
    tls_dir: str = _setting(
        "",
        "BATCHGATE_TLS_DIR",
        "Directory of the cluster certificates (`ca.crt`, `<identity>.crt`, `<identity>.key`), "
        "as `batchgate certs init` writes them. Empty: `<data_dir>/certs`.",
    )
    tls_ca_file: str = _setting(
        "",
        "BATCHGATE_TLS_CA_FILE",
        "The cluster CA bundle (PEM) every process trusts; two CAs while one replaces the other. "
        "Empty: `<tls_dir>/ca.crt`.",
    )
    tls_cert_file: str = _setting(
        "",
        "BATCHGATE_TLS_CERT_FILE",
        "This process's certificate (PEM, identity in its DNS SAN); `{service}` stands for the "
        "service's name. Empty: `<tls_dir>/{service}.crt`.",
    )
    tls_key_file: str = _setting(
        "",
        "BATCHGATE_TLS_KEY_FILE",
        "The key of `tls_cert_file`; `{service}` as there. Empty: `<tls_dir>/{service}.key`.",
    )
    insecure_internal: bool = _setting(
        False,
        "BATCHGATE_INSECURE_INTERNAL",
        "Development only: plaintext, unauthenticated calls between batchgate processes (and from "
        "Envoy). Anyone who reaches an internal port can then lease, record and finalize work; "
        "every process logs a warning when it starts.",
    )
    public_base_url: str = _setting(
        "",
        "BATCHGATE_PUBLIC_BASE_URL",
        "Base URL clients use (printed by `up`). Empty: http://<host>:<port>.",
    )
    # --- processes started by `batchgate up` --------------------------------------------
    executors: int = _setting(1, "BATCHGATE_EXECUTORS", "Executor processes `batchgate up` starts.")
    simulator_port: int = _setting(
        8099, "BATCHGATE_SIMULATOR_PORT", "Port of the built-in simulated upstream (`batchgate simulate`)."
    )
    simulator_latency_ms: float = _setting(
        20.0, "BATCHGATE_SIMULATOR_LATENCY_MS", "Simulated upstream's answer delay."
    )
    simulator_host: str = _setting(
        "127.0.0.1",
        "BATCHGATE_SIMULATOR_HOST",
        "Host executors reach the simulated upstream at when no provider is configured "
        "(compose: `simulator`).",
    )
    # --- limits ------------------------------------------------------------------------
    max_file_bytes: int = _setting(
        200 * 1000 * 1000,
        "BATCHGATE_MAX_FILE_BYTES",
        "Largest upload (bytes); enforced while streaming (413 beyond).",
    )
    max_batch_records: int = _setting(50_000, "BATCHGATE_MAX_BATCH_RECORDS", "Most records in one batch.")
    max_inline_bytes: int = _setting(
        32 * MIB, "BATCHGATE_MAX_INLINE_BYTES", "Largest POST /v1/batches body with inline `requests`."
    )
    max_record_bytes: int = _setting(
        10 * MIB, "BATCHGATE_MAX_RECORD_BYTES", "Largest request body of one record."
    )
    max_custom_id_length: int = _setting(
        512, "BATCHGATE_MAX_CUSTOM_ID_LENGTH", "Longest `custom_id` (1–512, the column's size)."
    )
    completion_windows: str = _setting(
        "24h", "BATCHGATE_COMPLETION_WINDOWS", "Comma-separated accepted `completion_window` values."
    )
    file_expiry_days: int = _setting(
        30, "BATCHGATE_FILE_EXPIRY_DAYS", "Default lifetime of `purpose=batch` files (and output files)."
    )
    idempotency_ttl_s: float = _setting(
        86400.0,
        "BATCHGATE_IDEMPOTENCY_TTL_S",
        "How long an `Idempotency-Key` answers with the batch its first create made.",
    )
    rejected_preview_max: int = _setting(
        20,
        "BATCHGATE_REJECTED_PREVIEW_MAX",
        "Rejections listed inline in a create answer (all are in the file).",
    )
    grpc_max_message_bytes: int = _setting(
        64 * MIB, "BATCHGATE_GRPC_MAX_MESSAGE_BYTES", "Largest gRPC message any service accepts or sends."
    )
    # --- scheduling and execution --------------------------------------------------------
    executor_concurrency: int = _setting(
        256, "BATCHGATE_EXECUTOR_CONCURRENCY", "Items one executor process runs at once."
    )
    lease_max_items: int = _setting(200, "BATCHGATE_LEASE_MAX_ITEMS", "Most items handed out per lease call.")
    lease_ttl_s: float = _setting(
        5.0,
        "BATCHGATE_LEASE_TTL_S",
        "How long an executor's leases outlive its last heartbeat (it beats every fifth of this): "
        "a dead executor's items run again this long after it died.",
    )
    lease_wait_ms: int = _setting(5000, "BATCHGATE_LEASE_WAIT_MS", "Longest long-poll of an idle executor.")
    result_flush_ms: int = _setting(
        0,
        "BATCHGATE_RESULT_FLUSH_MS",
        "How long a finished outcome waits for others to share its RecordResults call; 0: it goes "
        "as soon as the previous call is answered.",
    )
    result_batch_max: int = _setting(
        250, "BATCHGATE_RESULT_BATCH_MAX", "Most outcomes per RecordResults call."
    )
    request_timeout_s: float = _setting(
        600.0, "BATCHGATE_REQUEST_TIMEOUT_S", "Per-request time limit (error `request_timeout` beyond)."
    )
    maintenance_interval_s: float = _setting(
        1.0, "BATCHGATE_MAINTENANCE_INTERVAL_S", "How often leases are rescued and cancel/expiry applied."
    )
    finalize_lease_s: float = _setting(
        5.0,
        "BATCHGATE_FINALIZE_LEASE_S",
        "A finalize renews its claim every third of this; one that stops renewing this long (its "
        "process died) is taken over.",
    )
    ingest_sweep_interval_s: float = _setting(
        60.0,
        "BATCHGATE_INGEST_SWEEP_INTERVAL_S",
        "How often ingest reclaims expired files, abandoned uploads and interrupted creates.",
    )
    validating_timeout_s: float = _setting(
        900.0,
        "BATCHGATE_VALIDATING_TIMEOUT_S",
        "A create still `validating` after this was interrupted: cleaned up.",
    )
    # --- usage, cost and webhooks (results) ------------------------------------------------
    batch_discount_standard: float = _setting(
        0.5,
        "BATCHGATE_BATCH_DISCOUNT_STANDARD",
        "Discount off the model prices for `standard` batches, as a fraction (0.5 = 50%).",
    )
    batch_discount_expedited: float = _setting(
        0.0, "BATCHGATE_BATCH_DISCOUNT_EXPEDITED", "Discount for `expedited` batches, as a fraction."
    )
    webhook_timeout_s: float = _setting(
        10.0, "BATCHGATE_WEBHOOK_TIMEOUT_S", "Time limit of one webhook delivery attempt."
    )
    webhook_max_attempts: int = _setting(
        10, "BATCHGATE_WEBHOOK_MAX_ATTEMPTS", "Delivery attempts per webhook event before it is `failed`."
    )
    webhook_retry_initial_s: float = _setting(
        5.0,
        "BATCHGATE_WEBHOOK_RETRY_INITIAL_S",
        "Wait before the second attempt; each further wait doubles (with jitter).",
    )
    webhook_retry_max_s: float = _setting(
        3600.0, "BATCHGATE_WEBHOOK_RETRY_MAX_S", "Longest wait between two attempts."
    )
    webhook_concurrency: int = _setting(
        16, "BATCHGATE_WEBHOOK_CONCURRENCY", "Webhook deliveries in flight per results replica."
    )
    webhook_allowed_networks: str = _setting(
        "",
        "BATCHGATE_WEBHOOK_ALLOWED_NETWORKS",
        "Comma-separated CIDRs that webhook URLs may resolve to although they are loopback, "
        "private, link-local or reserved (e.g. `10.0.0.0/8`). Empty: only public addresses.",
    )
    # --- auth --------------------------------------------------------------------------
    auth_cache_s: float = _setting(
        5.0,
        "BATCHGATE_AUTH_CACHE_S",
        "How long a verified API key is cached per process; `keys revoke` waits this long.",
    )
    # --- testing ---------------------------------------------------------------------------
    crash_at: str = _setting(
        "",
        "BATCHGATE_CRASH_AT",
        "Test hook: comma-separated crash points (services/common/faults.py) at which the "
        "process exits abruptly (`fail:<point>`: fails once there as a lost connection). Never set "
        "in production.",
    )
    template_clock_file: str = _setting(
        "",
        "BATCHGATE_TEMPLATE_CLOCK_FILE",
        "Test hook: a file holding unix seconds that recurring-batch scheduling reads as the "
        "current time (services/common/cron.py). Empty: the system clock. Never set in production.",
    )
    # --- traces, metrics and logs -------------------------------------------------------
    log_level: str = _setting("INFO", "BATCHGATE_LOG_LEVEL", "Python log level.")
    log_format: str = _setting(
        "auto",
        "BATCHGATE_LOG_FORMAT",
        "`json` (one object per line, with trace and span ids), `text`, or `auto`: JSON unless "
        "stderr is a terminal.",
    )
    trace_sample_ratio: float = _setting(
        1.0,
        "BATCHGATE_TRACE_SAMPLE_RATIO",
        "Share of items (0–1) that get a trace when traces are exported (`OTEL_EXPORTER_OTLP_ENDPOINT`). "
        "Decided once when the item is accepted; every service follows that decision.",
    )
    trace_record_content: bool = _setting(
        False,
        "BATCHGATE_TRACE_RECORD_CONTENT",
        "Record prompts and completions in the executor's spans of traced items "
        "(`gen_ai.input.messages`, `gen_ai.output.messages`). Off: no content leaves in telemetry.",
    )
    metrics_host: str = _setting(
        "127.0.0.1",
        "BATCHGATE_METRICS_HOST",
        "Address the Prometheus scrape endpoints bind to (`metrics_port`).",
    )
    metrics_port: int = _setting(
        0,
        "BATCHGATE_METRICS_PORT",
        "Prometheus scrape port (`/metrics`) of a service process, on `metrics_host`; executor N "
        "uses port+1+N. 0: no scrape endpoint (metrics still go over OTLP when an endpoint is set).",
    )
    # --- from the YAML file only -----------------------------------------------------------
    retry: RetryPolicy = field(default_factory=RetryPolicy, metadata={"doc": "Retry policy (YAML `retry:`)."})
    providers: tuple[ProviderConfig, ...] = field(default=(), metadata={"doc": "YAML `providers:` list."})
    models: tuple[ModelConfig, ...] = field(default=(), metadata={"doc": "YAML `models:` list."})

    # --- derived -------------------------------------------------------------------------
    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{Path(self.data_dir).resolve() / 'batchgate.db'}"

    @property
    def completion_window_list(self) -> tuple[str, ...]:
        return tuple(w.strip() for w in self.completion_windows.split(",") if w.strip())

    def addrs(self, service: str) -> list[str]:
        """host:port of every replica of `service` (ingest, scheduler, results)."""
        raw = getattr(self, f"{service}_addrs")
        if raw:
            return [a.strip() for a in raw.split(",") if a.strip()]
        return [f"127.0.0.1:{getattr(self, f'{service}_port')}"]

    def metrics_port_of(self, services: tuple[str, ...] | list[str], executor_index: int = 0) -> int:
        """The scrape port of a process hosting `services` (0: none): executors are offset so
        that several of them and the core process fit on one host."""
        if not self.metrics_port or list(services) != ["executor"]:
            return self.metrics_port
        return self.metrics_port + 1 + executor_index

    def batch_discount(self, priority_tier: int) -> float:
        """The discount of a batch created in `priority_tier` (0 standard, 1 expedited)."""
        return self.batch_discount_expedited if priority_tier else self.batch_discount_standard

    @property
    def webhook_allowed_network_list(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(
            ipaddress.ip_network(n.strip(), strict=False)
            for n in self.webhook_allowed_networks.split(",")
            if n.strip()
        )

    @property
    def base_url(self) -> str:
        return self.public_base_url or f"http://{self.host}:{self.port}"

    def model(self, name: str) -> ModelConfig | None:
        return next((m for m in self.models if m.name == name), None)

    def provider(self, name: str) -> ProviderConfig | None:
        return next((p for p in self.providers if p.name == name), None)

    @property
    def uses_simulator(self) -> bool:
        return any(p.name == SIMULATED_PROVIDER for p in self.providers)


def env_fields() -> list[dataclasses.Field[Any]]:
    """Settings that an environment variable can set (the README table lists these)."""
    return [f for f in dataclasses.fields(Settings) if "env" in f.metadata]


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: str, environ: Mapping[str, str]) -> str:
    return _ENV_REF.sub(lambda m: environ.get(m.group(1), ""), value)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in _TRUE + _FALSE:
        raise ValueError(f"expected true or false, not {raw!r}")
    return text in _TRUE


def _cast(raw: Any, type_name: str) -> Any:
    """Settings' annotations are strings (postponed evaluation): int, float, bool or str."""
    return {"int": int, "float": float, "bool": _bool}.get(type_name, str)(raw)


def _simulated_catalogue(settings: Settings) -> tuple[tuple[ProviderConfig, ...], tuple[ModelConfig, ...]]:
    """Providers/models used when no YAML names any: everything runs on `batchgate simulate`."""
    base = f"http://{settings.simulator_host}:{settings.simulator_port}"
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
            endpoints=("/v1/chat/completions",),
        ),
    )
    return providers, models


def _parse_catalogue(doc: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "retry" in doc:
        out["retry"] = RetryPolicy(**doc["retry"])
    providers = []
    for p in doc.get("providers") or ():
        p = dict(p)
        keys = p.pop("api_keys", None) or ([p.pop("api_key")] if "api_key" in p else [])
        providers.append(ProviderConfig(**p, api_keys=tuple(_expand(str(k), environ) for k in keys)))
    models = []
    for m in doc.get("models") or ():
        models.append(
            ModelConfig(
                name=m["name"],
                provider=m["provider"],
                upstream_model=m.get("upstream_model", ""),
                fallbacks=tuple(m.get("fallbacks") or ()),
                endpoints=tuple(m.get("endpoints") or ()),
                price=Price(**(m.get("price") or {})),
            )
        )
    if providers:
        out["providers"] = tuple(providers)
    if models:
        out["models"] = tuple(models)
    return out


def load_settings(
    config_file: str | None = None, environ: Mapping[str, str] | None = None, **overrides: Any
) -> Settings:
    """Defaults ← YAML file ← environment ← explicit overrides."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or environ.get("BATCHGATE_CONFIG")
    if path:
        doc = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a mapping at the top level")
        scalar_names = {f.name for f in env_fields()}
        unknown = set(doc) - scalar_names - {"retry", "providers", "models"}
        if unknown:
            raise ValueError(f"{path}: unknown settings {sorted(unknown)}")
        values.update({k: v for k, v in doc.items() if k in scalar_names})
        values.update(_parse_catalogue(doc, environ))
    for f in env_fields():
        if f.metadata["env"] in environ:
            values[f.name] = environ[f.metadata["env"]]
    values.update(overrides)
    for f in env_fields():
        if f.name in values:
            values[f.name] = _cast(values[f.name], f.type)
    settings = Settings(**values)
    if not settings.providers:
        providers, models = _simulated_catalogue(settings)
        settings = dataclasses.replace(settings, providers=providers, models=settings.models or models)
    _check_limits(settings)
    _check_catalogue(settings)
    _check_values(settings)
    return _anthropic_endpoints(settings)


ANTHROPIC_ENDPOINTS = ("/v1/chat/completions",)


def _check_provider(p: ProviderConfig) -> None:
    if p.kind not in ("openai", "anthropic"):
        raise ValueError(f"provider {p.name}: kind must be openai or anthropic, not {p.kind!r}")
    if not 1 <= p.min_concurrency <= p.max_concurrency:
        raise ValueError(f"provider {p.name}: need 1 <= min_concurrency <= max_concurrency")
    if p.requests_per_minute < 0 or p.tokens_per_minute < 0 or p.rate_limit_cooldown_s < 0:
        raise ValueError(f"provider {p.name}: budgets and cool-down must not be negative")
    if p.default_max_tokens < 1:
        raise ValueError(f"provider {p.name}: default_max_tokens must be at least 1")


def _anthropic_endpoints(settings: Settings) -> Settings:
    """Models on an Anthropic provider serve chat completions only (translated to Messages)."""
    kinds = {p.name: p.kind for p in settings.providers}
    models = []
    for m in settings.models:
        if kinds.get(m.provider) == "anthropic":
            if set(m.endpoints) - set(ANTHROPIC_ENDPOINTS):
                raise ValueError(f"model {m.name}: an anthropic provider serves only {ANTHROPIC_ENDPOINTS}")
            m = dataclasses.replace(m, endpoints=ANTHROPIC_ENDPOINTS)
        models.append(m)
    return dataclasses.replace(settings, models=tuple(models))


def _check_retry(retry: RetryPolicy) -> None:
    if retry.max_attempts < 1 or retry.backoff_coefficient < 1:
        raise ValueError("retry: max_attempts and backoff_coefficient must be at least 1")
    if retry.initial_interval_s < 0 or retry.max_interval_s < 0:
        raise ValueError("retry: intervals must not be negative")


def _check_values(settings: Settings) -> None:
    for name in ("batch_discount_standard", "batch_discount_expedited"):
        if not 0.0 <= getattr(settings, name) <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1")
    if not 0.0 <= settings.trace_sample_ratio <= 1.0:
        raise ValueError("trace_sample_ratio must be between 0 and 1")
    if settings.log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}")
    if not 0 <= settings.metrics_port <= 65535:
        raise ValueError("metrics_port must be a port number (0: off)")
    try:
        _ = settings.webhook_allowed_network_list
    except ValueError as exc:
        raise ValueError(f"webhook_allowed_networks: {exc}") from None


MAX_CUSTOM_ID_COLUMN = 512  # items.custom_id


def _check_limits(settings: Settings) -> None:
    if not 1 <= settings.max_custom_id_length <= MAX_CUSTOM_ID_COLUMN:
        raise ValueError(f"max_custom_id_length must be between 1 and {MAX_CUSTOM_ID_COLUMN}")


def _check_catalogue(settings: Settings) -> None:
    _check_retry(settings.retry)
    names = {p.name for p in settings.providers}
    for p in settings.providers:
        _check_provider(p)
    models = {m.name for m in settings.models}
    for m in settings.models:
        if m.provider not in names:
            raise ValueError(f"model {m.name}: unknown provider {m.provider!r}")
        for fb in m.fallbacks:
            if fb not in models:
                raise ValueError(f"model {m.name}: unknown fallback {fb!r}")

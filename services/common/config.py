"""Every process-wide setting, limit and default of batchgate, in one place.

Each field's `env` names its environment variable and `doc` says what it does; README.md's
settings and limits tables are generated from them (`make gen`, `tools/config_docs.py`) and a
test fails when they are stale. Values are loaded and checked by
`batchgate.services.common.loading.load_settings`; the provider/model catalogue is
`batchgate.services.common.catalogue`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from batchgate.services.common.catalogue import SIMULATED_PROVIDER, ModelConfig, ProviderConfig, RetryPolicy

MIB = 1024 * 1024
LOG_FORMATS = ("auto", "json", "text")


def _setting(default: Any, env: str, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """Process-wide configuration. Build with `load_settings()`."""

    # --- where things live -------------------------------------------------------------
    data_dir: str = _setting(
        "./data", "BATCHGATE_DATA_DIR", "Directory of the SQLite database, generated Envoy config and certs."
    )
    database_url: str = _setting(
        "",
        "BATCHGATE_DATABASE_URL",
        "SQLAlchemy async URL. Empty: SQLite at `<data_dir>/batchgate.db`. "
        "PostgreSQL: `postgresql+asyncpg://user@host:5432/db`.",
    )
    sqlite_writer_cache_mib: int = _setting(
        8,
        "BATCHGATE_SQLITE_WRITER_CACHE_MIB",
        "SQLite's page cache of a process's one writing connection, in MiB (its hot B-tree pages).",
    )
    sqlite_reader_cache_mib: int = _setting(
        2,
        "BATCHGATE_SQLITE_READER_CACHE_MIB",
        "SQLite's page cache of each of a process's 8 reading connections, in MiB (the OS caches "
        "the file for all of them; each connection's own cache only grows the process).",
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
        50054, "BATCHGATE_EXECUTOR_PORT", "First executor's gRPC port (status, health); executor N: port+N."
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
    message_batch_max_requests: int = _setting(
        100_000,
        "BATCHGATE_MESSAGE_BATCH_MAX_REQUESTS",
        "Most requests in one Anthropic Message Batch (Anthropic's own limit by default).",
    )
    message_batch_max_bytes: int = _setting(
        256 * 1000 * 1000,
        "BATCHGATE_MESSAGE_BATCH_MAX_BYTES",
        "Largest POST /v1/messages/batches body (Anthropic's 256 MB by default; bodies past "
        "`grpc_max_message_bytes` are refused with 413 too, so raise both together).",
    )
    message_batch_window: str = _setting(
        "24h",
        "BATCHGATE_MESSAGE_BATCH_WINDOW",
        "How long a Message Batch may run before its unfinished requests expire (Anthropic's 24 h "
        "by default; units s, m, h, d).",
    )
    max_record_bytes: int = _setting(
        10 * MIB, "BATCHGATE_MAX_RECORD_BYTES", "Largest request body of one record."
    )
    max_custom_id_length: int = _setting(512, "BATCHGATE_MAX_CUSTOM_ID_LENGTH", "Longest `custom_id`.")
    completion_windows: str = _setting(
        "24h", "BATCHGATE_COMPLETION_WINDOWS", "Comma-separated accepted `completion_window` values."
    )
    file_expiry_days: int = _setting(
        30, "BATCHGATE_FILE_EXPIRY_DAYS", "Default lifetime of `purpose=batch` files (and output files)."
    )
    idempotency_ttl_s: float = _setting(
        86400.0, "BATCHGATE_IDEMPOTENCY_TTL_S", "How long an `Idempotency-Key` answers with its first batch."
    )
    rejected_preview_max: int = _setting(
        20, "BATCHGATE_REJECTED_PREVIEW_MAX", "Rejections listed in a create's answer (all are in the file)."
    )
    grpc_max_message_bytes: int = _setting(
        64 * MIB,
        "BATCHGATE_GRPC_MAX_MESSAGE_BYTES",
        "Largest gRPC message any service accepts or sends. Items travel between the services "
        "several to a message, within 7/8 of this: an upstream answer past that fails its record "
        "(`response_too_large`, not retried), and `max_record_bytes` must fit in it.",
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
    executor_shutdown_grace_s: float = _setting(
        10.0,
        "BATCHGATE_EXECUTOR_SHUTDOWN_GRACE_S",
        "On SIGTERM an executor's running calls get this long to finish; the rest are handed back.",
    )
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
    workflow_max_tokens: int = _setting(
        200_000, "BATCHGATE_WORKFLOW_MAX_TOKENS", "A workflow's or tool_config's default max_tokens."
    )
    workflow_max_tokens_cap: int = _setting(
        2_000_000, "BATCHGATE_WORKFLOW_MAX_TOKENS_CAP", "Cap of a workflow's or tool_config's max_tokens."
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
    # --- provider-native batches (scheduler) -----------------------------------------------
    native_poll_interval_s: float = _setting(
        30.0, "BATCHGATE_NATIVE_POLL_INTERVAL_S", "First poll wait of a provider batch; doubles while idle."
    )
    native_poll_max_interval_s: float = _setting(
        600.0, "BATCHGATE_NATIVE_POLL_MAX_INTERVAL_S", "Longest wait between two polls of a provider batch."
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
    tool_allowed_networks: str = _setting(
        "",
        "BATCHGATE_TOOL_ALLOWED_NETWORKS",
        "The same for the tool servers of tool-calling records (`batchgate.tool_config.url`). "
        "Empty: whatever `webhook_allowed_networks` allows; `none`: only public addresses.",
    )
    # --- retention -------------------------------------------------------------------------
    retention_days: float = _setting(
        30.0,
        "BATCHGATE_RETENTION_DAYS",
        "Days a batch's data (its files, items, results and webhook deliveries) is kept after it "
        "ends; 0 keeps it. Per project: `batchgate projects set-policy --retention-days`.",
    )
    bookkeeping_days: float = _setting(
        400.0,
        "BATCHGATE_BOOKKEEPING_DAYS",
        "Days a purged batch's bookkeeping (who, which batch, counts, cost and usage events) is kept "
        "after the batch ends (at least the retention); 0 keeps it. Per project: `--bookkeeping-days`.",
    )
    retention_interval_s: float = _setting(
        3600.0, "BATCHGATE_RETENTION_INTERVAL_S", "How often the scheduler leader purges old data."
    )
    retention_clock_offset_s: float = _setting(
        0.0, "BATCHGATE_RETENTION_CLOCK_OFFSET_S", "Test hook: seconds added to retention's clock."
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
        "Share of items that get a trace when traces are exported (`OTEL_EXPORTER_OTLP_ENDPOINT`). "
        "Decided once when the item is accepted; every service follows that decision.",
    )
    trace_record_content: bool = _setting(
        False,
        "BATCHGATE_TRACE_RECORD_CONTENT",
        "Record prompts and completions in the executor's spans of traced items "
        "(`gen_ai.input.messages`, `gen_ai.output.messages`). Off: no content leaves in telemetry.",
    )
    metrics_host: str = _setting(
        "127.0.0.1", "BATCHGATE_METRICS_HOST", "Address the scrape endpoints (`metrics_port`) bind to."
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

    def batch_discount(self, priority_tier: int) -> float:
        """The discount of a batch created in `priority_tier` (0 standard, 1 expedited)."""
        return self.batch_discount_expedited if priority_tier else self.batch_discount_standard

    @property
    def base_url(self) -> str:
        return self.public_base_url or f"http://{self.host}:{self.port}"

    def model(self, name: str) -> ModelConfig | None:
        return self._models_by_name.get(name)

    def provider(self, name: str) -> ProviderConfig | None:
        return self._providers_by_name.get(name)

    @cached_property
    def _models_by_name(self) -> dict[str, ModelConfig]:
        """Looked up per record and per item: scanning the list was 5% of a create's CPU."""
        return {m.name: m for m in self.models}  # names are unique (`check_catalogue`)

    @cached_property
    def _providers_by_name(self) -> dict[str, ProviderConfig]:
        return {p.name: p for p in self.providers}

    @property
    def uses_simulator(self) -> bool:
        return self.provider(SIMULATED_PROVIDER) is not None

"""Configuration: precedence, YAML catalogue, and the README table generated from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchgate.services.common.catalogue import SIMULATED_PROVIDER
from batchgate.services.common.config import Settings
from batchgate.services.common.loading import env_fields, load_settings
from batchgate.services.common.setting_checks import FREE_TEXT, RANGES, TEXT_CHECKS, SettingError, problem
from tools.config_docs import CATALOGUE_BEGIN, CATALOGUE_END, README, block, catalogue_block, readme_block

MIB = 2**20


def test_readme_documents_every_setting() -> None:
    assert readme_block(README.read_text()) == block(), "run `make gen` to refresh README.md"


def test_readme_documents_every_provider_and_retry_key() -> None:
    text = README.read_text()
    assert readme_block(text, CATALOGUE_BEGIN, CATALOGUE_END) == catalogue_block(), "run `make gen`"


def test_environment_beats_yaml_beats_defaults(tmp_path: Path) -> None:
    config = tmp_path / "bg.yaml"
    config.write_text("port: 9100\nexecutors: 3\n")
    settings = load_settings(str(config), environ={"BATCHGATE_PORT": "9200"})
    assert settings.port == 9200
    assert settings.executors == 3
    assert settings.lease_ttl_s == 5.0


def test_without_providers_every_model_runs_on_the_simulator() -> None:
    settings = load_settings(environ={})
    assert settings.uses_simulator
    assert settings.model("gpt-4o-mini").provider == SIMULATED_PROVIDER


def test_anthropic_models_serve_chat_completions_only(tmp_path: Path) -> None:
    config = tmp_path / "bg.yaml"
    config.write_text("""
providers:
  - {name: claude, kind: anthropic, base_url: "https://api.anthropic.com/v1", api_key: k,
     requests_per_minute: 50, tokens_per_minute: 20000, default_max_tokens: 1024}
models:
  - {name: claude-haiku, provider: claude}
""")
    settings = load_settings(str(config), environ={})
    assert settings.model("claude-haiku").endpoints == ("/v1/chat/completions",)
    provider = settings.provider("claude")
    assert (provider.api_keys, provider.requests_per_minute, provider.default_max_tokens) == (
        ("k",),
        50,
        1024,
    )


def test_yaml_catalogue_with_env_expansion(tmp_path: Path) -> None:
    config = tmp_path / "bg.yaml"
    config.write_text("""
providers:
  - {name: vllm, kind: openai, base_url: "http://127.0.0.1:8000/v1", api_keys: ["${VLLM_KEY}"]}
models:
  - {name: llama, provider: vllm, upstream_model: meta/llama, fallbacks: [llama2],
     price: {input_per_mtok: 1.0, output_per_mtok: 2.0}}
  - {name: llama2, provider: vllm}
retry: {max_attempts: 2}
""")
    settings = load_settings(str(config), environ={"VLLM_KEY": "secret"})
    assert not settings.uses_simulator
    assert settings.provider("vllm").api_keys == ("secret",)
    assert settings.model("llama").fallbacks == ("llama2",)
    assert settings.model("llama").price.output_per_mtok == 2.0
    assert settings.retry.max_attempts == 2


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("nonsense: 1\n", "unknown settings"),
        ("providers: [{name: p, kind: grpc, base_url: 'http://x'}]\n", "kind must be"),
        (
            "providers: [{name: p, base_url: 'http://x'}]\nmodels: [{name: m, provider: q}]\n",
            "unknown provider",
        ),
        (
            "providers: [{name: p, base_url: 'http://x'}]\n"
            "models: [{name: m, provider: p, fallbacks: [z]}]\n",
            "unknown fallback",
        ),
        (
            "providers: [{name: p, base_url: 'http://x'}, {name: p, base_url: y}]\n",
            r"more than one provider is named \['p'\]",
        ),
        (
            "providers: [{name: p, base_url: 'http://x'}]\n"
            "models: [{name: m, provider: p}, {name: n, provider: p}, {name: m, provider: p}]\n",
            r"more than one model is named \['m'\]",
        ),
        ("retry: {max_attempts: 0}\n", "max_attempts"),
        ("providers: [{name: p, base_url: api.openai.com/v1}]\n", "base_url must be an http\\(s\\) URL"),
        ("providers: [{name: p, base_url: 'ftp://h/v1'}]\n", "base_url must be an http\\(s\\) URL"),
        ("providers: [{name: p, base_url: 'http://u:pw@h/v1'}]\n", "must not hold credentials"),
        ("executor_shutdown_grace_s: 30\n", "executor_shutdown_grace_s .*must be 0 to 10"),
        ("executor_shutdown_grace_s: -1\n", "executor_shutdown_grace_s .*must be 0 to 10"),
        (
            "providers: [{name: p, base_url: 'http://x', max_concurrency: 4, min_concurrency: 5}]\n",
            "min_concurrency",
        ),
        ("providers: [{name: p, base_url: 'http://x', requests_per_minute: -1}]\n", "negative"),
        (
            "providers: [{name: a, kind: anthropic, base_url: 'http://x'}]\n"
            "models: [{name: m, provider: a, endpoints: [/v1/embeddings]}]\n",
            "anthropic provider serves only",
        ),
        ("providers: [{name: p, base_url: 'http://x', batch_mode: native}]\n", "native with batch_api"),
        ("providers: [{name: p, base_url: 'http://x', batch_api: true, batch_limit: 0}]\n", "batch_limit"),
        (
            "providers: [{name: p, base_url: 'http://x', batch_api: true, batch_discount: 2}]\n",
            "batch_discount",
        ),
        (
            "providers: [{name: p, base_url: 'http://x'}]\n"
            "models: [{name: m, provider: p, batch_mode: native}]\n",
            "needs a provider with batch_api",
        ),
        (
            "providers: [{name: p, base_url: 'http://x'}]\n"
            "models: [{name: m, provider: p, batch_mode: sometimes}]\n",
            "batch_mode must be",
        ),
    ],
)
def test_bad_configuration_is_refused_with_a_reason(tmp_path: Path, yaml_text: str, message: str) -> None:
    config = tmp_path / "bg.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ValueError, match=message):
        load_settings(str(config), environ={})


@pytest.mark.parametrize("windows", ["24h,1x", "0s", "24h,h", "1.5h"])
def test_an_unreadable_completion_window_is_a_startup_error(windows: str) -> None:
    """Checked once when the settings load, not met by a client's create as a 400."""
    with pytest.raises(ValueError, match="completion_windows"):
        load_settings(environ={"BATCHGATE_COMPLETION_WINDOWS": windows})
    assert load_settings(environ={"BATCHGATE_COMPLETION_WINDOWS": "24h, 5s"}).completion_window_list == (
        "24h",
        "5s",
    )


# --- every setting's allowed values (services/common/setting_checks.py) ---------------------


def test_every_numeric_setting_has_a_declared_range() -> None:
    """A new setting cannot be added unchecked: numbers need a range, text a check or a reason."""
    fields = {f.name: str(f.type) for f in env_fields()}
    numeric = {name for name, kind in fields.items() if kind in ("int", "float")}
    text = {name for name, kind in fields.items() if kind == "str"}
    assert numeric - set(RANGES) == set(), "add the setting's range to setting_checks.RANGES"
    assert text - set(TEXT_CHECKS) - FREE_TEXT == set(), "check it in TEXT_CHECKS or list it in FREE_TEXT"
    assert set(RANGES) - numeric == set(), "a range of no numeric setting"
    assert set(TEXT_CHECKS) | FREE_TEXT <= text, "a text check of no text setting"
    defaults = Settings()
    assert [name for name in fields if problem(name, getattr(defaults, name))] == []


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        # not a number of the setting's kind
        ("BATCHGATE_PORT", "abc", "'abc' is not a whole number"),
        ("BATCHGATE_FILE_EXPIRY_DAYS", "0.0001", "'0.0001' is not a whole number"),
        ("BATCHGATE_LEASE_TTL_S", "soon", "'soon' is not a number"),
        ("BATCHGATE_INSECURE_INTERNAL", "maybe", "expected true or false, not 'maybe'"),
        # out of range
        ("BATCHGATE_RETENTION_DAYS", "-1", r"must be 0 or more \(0 keeps\), not -1"),
        ("BATCHGATE_BOOKKEEPING_DAYS", "-5", r"must be 0 or more \(0 keeps\), not -5"),
        ("BATCHGATE_FILE_EXPIRY_DAYS", "0", "must be 1 or more, not 0"),
        ("BATCHGATE_PORT", "70000", "must be 1 to 65535, not 70000"),
        ("BATCHGATE_PORT", "-1", "must be 1 to 65535, not -1"),
        ("BATCHGATE_INGEST_PORT", "0", "must be 1 to 65535, not 0"),
        ("BATCHGATE_EXECUTORS", "-2", "must be 0 or more .*, not -2"),
        ("BATCHGATE_MAX_BATCH_RECORDS", "0", "must be 1 or more, not 0"),
        ("BATCHGATE_MAX_FILE_BYTES", "-1", "must be 1 or more, not -1"),
        ("BATCHGATE_LEASE_TTL_S", "0", "must be above 0, not 0"),
        ("BATCHGATE_MAINTENANCE_INTERVAL_S", "-1", "must be above 0, not -1"),
        ("BATCHGATE_AUTH_CACHE_S", "-1", "must be 0 or more .*, not -1"),
        ("BATCHGATE_REQUEST_TIMEOUT_S", "0", "must be above 0, not 0"),
        ("BATCHGATE_LEASE_WAIT_MS", "0", "must be 1 or more, not 0"),
        ("BATCHGATE_GRPC_MAX_MESSAGE_BYTES", "4294967296", "must be 2097152 to 2147483647"),
        ("BATCHGATE_GRPC_MAX_MESSAGE_BYTES", "1000000", "must be 2097152 to 2147483647 .*file must fit"),
        ("BATCHGATE_METRICS_PORT", "70000", "must be 0 to 65535 .*, not 70000"),
        # not finite
        ("BATCHGATE_RETENTION_DAYS", "inf", "must be a finite number .*, not inf"),
        ("BATCHGATE_WEBHOOK_TIMEOUT_S", "1e999", "must be a finite number .*, not inf"),
        ("BATCHGATE_RETENTION_CLOCK_OFFSET_S", "nan", "must be a finite number, not nan"),
        # text that is not of its format
        ("BATCHGATE_COMPLETION_WINDOWS", "", "'' names no window"),
        ("BATCHGATE_COMPLETION_WINDOWS", " , ", "' , ' names no window"),
        ("BATCHGATE_MESSAGE_BATCH_WINDOW", "1 day", "'1 day' is not <number><unit>"),
        ("BATCHGATE_DATABASE_URL", "mysql://x", "scheme 'mysql' is not supported"),
        ("BATCHGATE_DATABASE_URL", "sqlite:///x.db", "scheme 'sqlite' is not supported"),
        ("BATCHGATE_DATABASE_URL", "batchgate.db", "it is not a URL"),
        ("BATCHGATE_LOG_LEVEL", "FOO", "'FOO' is not a log level"),
        ("BATCHGATE_LOG_FORMAT", "yaml", "'yaml' is not one of auto, json, text"),
        ("BATCHGATE_WEBHOOK_ALLOWED_NETWORKS", "10.0.0.0/33", "'10.0.0.0/33' does not appear"),
    ],
)
def test_a_bad_setting_is_refused_naming_it_and_its_value(env: str, value: str, message: str) -> None:
    name = next(f.name for f in env_fields() if f.metadata["env"] == env)
    with pytest.raises(SettingError, match=rf"^{name} \({env}\): {message}") as refused:
        load_settings(environ={env: value})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("port: [8080]\n", r"^port \(BATCHGATE_PORT\): \[8080\] is not a whole number"),
        ("executors: true\n", r"^executors \(BATCHGATE_EXECUTORS\): True is not a whole number"),
        ("file_expiry_days: 1.5\n", r"^file_expiry_days \(BATCHGATE_FILE_EXPIRY_DAYS\): 1.5 is not a whole"),
        ("retention_days: -1\n", r"^retention_days \(BATCHGATE_RETENTION_DAYS\): must be 0 or more"),
        ("port: [\n", r"^config \(--config, BATCHGATE_CONFIG\): .*bg.yaml is not valid YAML \(line 2\)"),
        ("- port\n", r"^config \(--config, BATCHGATE_CONFIG\): .*bg.yaml: expected a mapping"),
        ("nonsense: 1\n", r"^config \(--config, BATCHGATE_CONFIG\): .*bg.yaml: unknown settings"),
        ("retry: {max_attempts: 0}\n", r"^config \(--config, BATCHGATE_CONFIG\): .*max_attempts"),
        (
            "retry: {initial_interval_s: 10, max_interval_s: 5}\n",
            r"^config .*: retry: max_interval_s \(5\) must not be below initial_interval_s \(10\)",
        ),
    ],
)
def test_a_bad_config_file_is_refused_naming_the_setting(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    config = tmp_path / "bg.yaml"
    config.write_text(yaml_text)
    with pytest.raises(SettingError, match=message):
        load_settings(str(config), environ={})


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"BATCHGATE_EXECUTOR_PORT": "65534", "BATCHGATE_EXECUTORS": "3"},
            r"^executors \(BATCHGATE_EXECUTORS\): 3 executors listen on 65534 to 65536 .*past 65535$",
        ),
        (
            {"BATCHGATE_METRICS_PORT": "65534", "BATCHGATE_EXECUTORS": "2"},
            r"^executors \(BATCHGATE_EXECUTORS\): 2 executors scrape on 65535 to 65536 .*past 65535$",
        ),
        (
            {"BATCHGATE_GRPC_MAX_MESSAGE_BYTES": str(4 * MIB), "BATCHGATE_MAX_RECORD_BYTES": str(4 * MIB)},
            r"^max_record_bytes \(.*\): must fit in one gRPC message between the services: at most 3668992 ",
        ),
        (
            {"BATCHGATE_NATIVE_POLL_INTERVAL_S": "60", "BATCHGATE_NATIVE_POLL_MAX_INTERVAL_S": "30"},
            r"^native_poll_max_interval_s \(.*\): must not be below native_poll_interval_s \(60\), not 30$",
        ),
        (
            {"BATCHGATE_WEBHOOK_RETRY_INITIAL_S": "10", "BATCHGATE_WEBHOOK_RETRY_MAX_S": "2.5"},
            r"^webhook_retry_max_s \(.*\): must not be below webhook_retry_initial_s \(10\), not 2.5$",
        ),
        (
            {"BATCHGATE_WORKFLOW_MAX_TOKENS": "5000000"},
            r"^workflow_max_tokens_cap \(.*\): must not be below workflow_max_tokens \(5000000\), "
            r"not 2000000$",
        ),
    ],
)
def test_settings_that_only_conflict_together_are_refused_naming_one(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingError, match=message):
        load_settings(environ=environ)


def test_the_edges_of_each_conflict_are_accepted() -> None:
    settings = load_settings(
        environ={
            "BATCHGATE_EXECUTOR_PORT": "65533",
            "BATCHGATE_EXECUTORS": "3",
            "BATCHGATE_METRICS_PORT": "65532",
            "BATCHGATE_NATIVE_POLL_MAX_INTERVAL_S": "30",
            "BATCHGATE_WEBHOOK_RETRY_MAX_S": "5",
            "BATCHGATE_WORKFLOW_MAX_TOKENS": "2000000",
        }
    )
    assert (settings.executors, settings.native_poll_max_interval_s) == (3, 30.0)


def test_a_missing_config_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.yaml"
    with pytest.raises(SettingError, match=rf"^config \(--config, BATCHGATE_CONFIG\): cannot read {missing}"):
        load_settings(str(missing), environ={})
    with pytest.raises(SettingError, match="cannot read"):
        load_settings(environ={"BATCHGATE_CONFIG": str(missing)})


def test_a_refused_database_url_does_not_repeat_its_password() -> None:
    with pytest.raises(SettingError) as refused:
        load_settings(environ={"BATCHGATE_DATABASE_URL": "mysql://admin:hunter2@db/batchgate"})
    assert "hunter2" not in str(refused.value)


def test_the_edges_of_each_range_and_the_documented_zeros_are_accepted(tmp_path: Path) -> None:
    settings = load_settings(
        environ={
            "BATCHGATE_PORT": "65535",
            "BATCHGATE_INGEST_PORT": "1",
            "BATCHGATE_EXECUTORS": "0",  # a stack whose executors run elsewhere (tests, bench)
            "BATCHGATE_RETENTION_DAYS": "0",
            "BATCHGATE_BOOKKEEPING_DAYS": "0",
            "BATCHGATE_AUTH_CACHE_S": "0",
            "BATCHGATE_RESULT_FLUSH_MS": "0",
            "BATCHGATE_METRICS_PORT": "0",
            "BATCHGATE_EXECUTOR_SHUTDOWN_GRACE_S": "0",
            "BATCHGATE_MAINTENANCE_INTERVAL_S": "0.1",
            "BATCHGATE_WEBHOOK_RETRY_INITIAL_S": "0.05",
            "BATCHGATE_RETENTION_CLOCK_OFFSET_S": "-3600",
            "BATCHGATE_LOG_LEVEL": "debug",
            "BATCHGATE_DATABASE_URL": "postgresql+asyncpg://postgres@127.0.0.1:5432/test",
        }
    )
    assert (settings.port, settings.executors, settings.retention_days, settings.log_level) == (
        65535,
        0,
        0.0,
        "debug",
    )
    sqlite = load_settings(environ={"BATCHGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/bg.db"})
    assert sqlite.resolved_database_url.startswith("sqlite+aiosqlite://")
    config = tmp_path / "bg.yaml"
    config.write_text("file_expiry_days: 7.0\nport: '9300'\n")
    from_file = load_settings(str(config), environ={})
    assert (from_file.file_expiry_days, from_file.port) == (7, 9300)

"""The providers/models catalogue of the YAML file (batchgate.services.common.catalogue): `${VAR}`
in every string, and every bad key or value refused as a ValueError naming the entry and key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batchgate.services.common.catalogue import (
    SUPPORTED_ENDPOINTS,
    ModelConfig,
    ProviderConfig,
    RetryPolicy,
    check_catalogue,
    expand_env,
    parse_catalogue,
)
from batchgate.services.common.loading import load_settings

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "providers: [{name: sim, base_url: 'http://127.0.0.1:1/v1'}]\n"


def catalogue(text: str, environ: dict[str, str] | None = None) -> tuple[ModelConfig, ...]:
    """Parsed and checked as `load_settings` does with the file's catalogue keys."""
    parsed = parse_catalogue(yaml.safe_load(text), environ or {})
    return check_catalogue(
        retry=parsed.get("retry", RetryPolicy()),
        providers=parsed.get("providers", ()),
        models=parsed.get("models", ()),
    )


def test_every_string_of_the_catalogue_reads_the_environment() -> None:
    text = """
providers:
  - {name: "${P}", kind: "${KIND}", base_url: "${SIM_URL}", api_keys: ["${SIM_KEY}", "k-${N}"],
     anthropic_version: "${AV}", max_tokens_field: "${MTF}", batch_mode: "${MODE}",
     max_concurrency: "${MAXC}", batch_api: "${BAPI}", timeout_s: "${TIMEOUT}"}
  - {name: other, base_url: "http://o/v1", api_key: "${ONE}"}
models:
  - {name: "${M}", provider: "${P}", upstream_model: "${UPSTREAM}", fallbacks: ["${FB}"],
     endpoints: ["${EP}"], batch_mode: "${MODE}", price: {input_per_mtok: "${PRICE}"}}
  - {name: m2, provider: other, hold_max_tokens: "${HOLD}"}
retry: {max_attempts: "${ATTEMPTS}"}
"""
    env = {
        "P": "sim",
        "KIND": "openai",
        "SIM_URL": "http://127.0.0.1:58099/v1",
        "SIM_KEY": "secret",
        "N": "2",
        "AV": "2024-01-01",
        "MTF": "max_completion_tokens",
        "MODE": "execute",
        "MAXC": "12",
        "BAPI": "true",
        "TIMEOUT": "2.5",
        "ONE": "only",
        "M": "m1",
        "UPSTREAM": "gpt-4o-mini",
        "FB": "m2",
        "EP": "/v1/chat/completions",
        "PRICE": "0.15",
        "HOLD": "100",
        "ATTEMPTS": "3",
    }
    parsed = parse_catalogue(yaml.safe_load(text), env)
    sim, other = parsed["providers"]
    assert sim == ProviderConfig(
        name="sim",
        kind="openai",
        base_url="http://127.0.0.1:58099/v1",
        api_keys=("secret", "k-2"),
        anthropic_version="2024-01-01",
        max_tokens_field="max_completion_tokens",
        batch_mode="execute",
        max_concurrency=12,
        batch_api=True,
        timeout_s=2.5,
    )
    assert other.api_keys == ("only",)
    m1, m2 = parsed["models"]
    assert (m1.name, m1.provider, m1.upstream_model, m1.fallbacks) == ("m1", "sim", "gpt-4o-mini", ("m2",))
    assert (m1.endpoints, m1.batch_mode, m1.price.input_per_mtok) == (
        ("/v1/chat/completions",),
        "execute",
        0.15,
    )
    assert m2.hold_max_tokens == 100
    assert parsed["retry"].max_attempts == 3
    check_catalogue(retry=parsed["retry"], providers=parsed["providers"], models=parsed["models"])


def test_an_unset_variable_is_an_error_naming_it_unless_it_has_a_default() -> None:
    text = PROVIDER.replace("'http://127.0.0.1:1/v1'", '"${SIM_URL}"')
    with pytest.raises(ValueError, match=r"provider sim: base_url: environment variable SIM_URL is not set"):
        catalogue(text)
    with pytest.raises(ValueError, match=r"model m1: price.input_per_mtok: environment variable PRICE is"):
        catalogue(PROVIDER + "models: [{name: m1, provider: sim, price: {input_per_mtok: '${PRICE}'}}]")
    with pytest.raises(ValueError, match=r"models\[0\]: name: environment variable M is not set"):
        catalogue(PROVIDER + "models: [{name: '${M}', provider: sim}]")
    # A default stands in when the variable is unset or empty; an empty value set on purpose stays.
    text = (
        PROVIDER + "models: [{name: m1, provider: sim, upstream_model: '${UP:-gpt-4o}', batch_mode: '${B}'}]"
    )
    with pytest.raises(ValueError, match="model m1: batch_mode: environment variable B is not set"):
        catalogue(text)
    (model,) = catalogue(text, {"B": ""})
    assert (model.upstream_model, model.batch_mode) == ("gpt-4o", "")
    assert catalogue(text, {"B": "", "UP": "mini"})[0].upstream_model == "mini"
    assert expand_env({"a": ["$x ${X}"]}, {"X": "1"}, "here") == {"a": ["$x 1"]}


def test_an_empty_base_url_is_refused() -> None:
    with pytest.raises(ValueError, match="provider sim: base_url is required"):
        catalogue("providers: [{name: sim, base_url: '${U}'}]", {"U": ""})
    with pytest.raises(ValueError, match="provider sim: base_url is required"):
        catalogue("providers: [{name: sim}]")


@pytest.mark.parametrize(
    "models, message",
    [
        (
            "[{name: m1, provider: sim, fallback: [m2], prcie: {input_per_mtok: 1}}]",
            r"model m1: unknown keys \['fallback', 'prcie'\] \(known: name, provider, upstream_model, "
            r"fallbacks, price",
        ),
        ("[{name: m1, provider: sim, upstream-model: x}]", r"model m1: unknown keys \['upstream-model'\]"),
        (
            "[{name: m1, provider: sim, price: {input_per_mtok: 1, output: 2}}]",
            r"model m1: price: unknown keys \['output'\] \(known: input_per_mtok, cached_input_per_mtok",
        ),
        (
            "[{name: m1, provider: sim, endpoints: [/v1/chat/completion]}]",
            r"model m1: endpoint '/v1/chat/completion' is not one batchgate serves \(/v1/chat/completions, ",
        ),
        ("[{name: m1, provider: sim, endpoints: /v1/embeddings}]", "model m1: endpoints must be a list"),
        (
            "[{name: m1, provider: sim, price: {input_per_mtok: -5}}]",
            r"model m1: price.input_per_mtok must be ≥ 0",
        ),
        (
            "[{name: m1, provider: sim, price: {cached_input_per_mtok: -0.1}}]",
            r"model m1: price.cached_input_per_mtok must be ≥ 0",
        ),
        ("[{name: m1, provider: sim, price: {output_per_mtok: .nan}}]", r"price.output_per_mtok must be ≥ 0"),
        (
            "[{name: m1, provider: sim, price: {output_per_mtok: cheap}}]",
            "price: output_per_mtok must be a number",
        ),
        (
            "[{name: m1, provider: sim, price: 5}]",
            "model m1: price: expected a mapping with keys input_per_mtok",
        ),
        ("[m1]", r"models\[0\]: expected a mapping with keys name, provider, .*; not 'm1'"),
        ("[{provider: sim}]", r"models\[0\]: name is required"),
        ("[{name: m1}]", "model m1: provider is required"),
        ("[{name: '', provider: sim}]", "a model's name must not be empty"),
        (
            "[{name: m1, provider: sim, hold_max_tokens: lots}]",
            "model m1: hold_max_tokens must be an integer",
        ),
        ("[{name: m1, provider: sim, hold_max_tokens: 0}]", "model m1: hold_max_tokens must be at least 1"),
        ("[{name: m1, provider: sim, upstream_model: [a]}]", "model m1: upstream_model must be text"),
        ("{m1: {provider: sim}}", "models: expected a list"),
    ],
)
def test_a_bad_model_is_refused_naming_it_and_the_key(models: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        catalogue(f"{PROVIDER}models: {models}\n")


@pytest.mark.parametrize(
    "provider, message",
    [
        (
            "{name: sim, base_url: x, max_concurrency: lots}",
            "provider sim: max_concurrency must be an integer, not 'lots'",
        ),
        (
            "{name: sim, base_url: x, max_concurrency: 2.5}",
            "provider sim: max_concurrency must be an integer",
        ),
        (
            "{name: sim, base_url: x, adaptive_concurrency: maybe}",
            "adaptive_concurrency must be true or false",
        ),
        ("{name: sim, base_url: x, timeout_s: soon}", "provider sim: timeout_s must be a number"),
        ("{name: sim, base_url: x, api_keys: k}", "provider sim: api_keys must be a list"),
        ("{name: sim, base_url: x, api_key: k, api_keys: [k]}", "give api_keys or api_key, not both"),
        (
            "{name: sim, base_url: x, rpm: 5}",
            r"provider sim: unknown keys \['rpm'\] \(known: name, kind, .*api_key\)",
        ),
        ("sim", r"providers\[0\]: expected a mapping"),
        ("{base_url: x}", r"providers\[0\]: name is required"),
    ],
)
def test_a_bad_provider_is_refused_naming_it_and_the_key(provider: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        catalogue(f"providers: [{provider}]\n")


@pytest.mark.parametrize(
    "retry, message",
    [
        ("{max_attempt: 2}", r"retry: unknown keys \['max_attempt'\] \(known: initial_interval_s"),
        ("{max_attempts: two}", "retry: max_attempts must be an integer"),
        ("3", "retry: expected a mapping"),
    ],
)
def test_a_bad_retry_policy_is_refused(retry: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        catalogue(f"retry: {retry}\n")


def test_values_yaml_writes_otherwise_are_read_as_the_field_s_type() -> None:
    text = """
providers: [{name: a, kind: anthropic, base_url: x, anthropic_version: 2023-06-01, api_keys: [1234],
             batch_api: "yes", rate_limit_cooldown_s: 2, max_concurrency: 8.0}]
models: [{name: 4, provider: a, fallbacks: null, endpoints: null, price: null}]
"""
    parsed = parse_catalogue(yaml.safe_load(text), {})
    (provider,) = parsed["providers"]
    assert (provider.anthropic_version, provider.api_keys, provider.batch_api) == (
        "2023-06-01",
        ("1234",),
        True,
    )
    assert (provider.rate_limit_cooldown_s, provider.max_concurrency) == (2.0, 8)
    assert parsed["models"] == (ModelConfig(name="4", provider="a"),)


def test_the_shipped_example_catalogue_loads() -> None:
    text = (ROOT / "deploy" / "config" / "providers.example.yaml").read_text()
    (model,) = catalogue(text, {"OPENAI_API_KEY": "sk-test"})
    assert model.price.output_per_mtok == 0.6
    assert set(model.served_endpoints) == set(SUPPORTED_ENDPOINTS)


def test_a_plain_setting_in_the_file_is_expanded_too(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text('max_batch_records: "${RECORDS}"\nlog_level: "${LEVEL:-warning}"\n')
    settings = load_settings(str(config), environ={"RECORDS": "123"})
    assert (settings.max_batch_records, settings.log_level) == (123, "warning")

"""Configuration: precedence, YAML catalogue, and the README table generated from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchgate.services.common.catalogue import SIMULATED_PROVIDER
from batchgate.services.common.loading import load_settings
from tools.config_docs import CATALOGUE_BEGIN, CATALOGUE_END, README, block, catalogue_block, readme_block


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
        ("providers: [{name: p, kind: grpc, base_url: x}]\n", "kind must be"),
        ("providers: [{name: p, base_url: x}]\nmodels: [{name: m, provider: q}]\n", "unknown provider"),
        (
            "providers: [{name: p, base_url: x}]\nmodels: [{name: m, provider: p, fallbacks: [z]}]\n",
            "unknown fallback",
        ),
        (
            "providers: [{name: p, base_url: x}, {name: p, base_url: y}]\n",
            r"more than one provider is named \['p'\]",
        ),
        (
            "providers: [{name: p, base_url: x}]\n"
            "models: [{name: m, provider: p}, {name: n, provider: p}, {name: m, provider: p}]\n",
            r"more than one model is named \['m'\]",
        ),
        ("retry: {max_attempts: 0}\n", "max_attempts"),
        ("executor_shutdown_grace_s: 30\n", "executor_shutdown_grace_s must be between 0 and 10"),
        ("executor_shutdown_grace_s: -1\n", "executor_shutdown_grace_s must be between 0 and 10"),
        ("providers: [{name: p, base_url: x, max_concurrency: 4, min_concurrency: 5}]\n", "min_concurrency"),
        ("providers: [{name: p, base_url: x, requests_per_minute: -1}]\n", "negative"),
        (
            "providers: [{name: a, kind: anthropic, base_url: x}]\n"
            "models: [{name: m, provider: a, endpoints: [/v1/embeddings]}]\n",
            "anthropic provider serves only",
        ),
        ("providers: [{name: p, base_url: x, batch_mode: native}]\n", "native with batch_api"),
        ("providers: [{name: p, base_url: x, batch_api: true, batch_limit: 0}]\n", "batch_limit"),
        ("providers: [{name: p, base_url: x, batch_api: true, batch_discount: 2}]\n", "batch_discount"),
        (
            "providers: [{name: p, base_url: x}]\nmodels: [{name: m, provider: p, batch_mode: native}]\n",
            "needs a provider with batch_api",
        ),
        (
            "providers: [{name: p, base_url: x}]\nmodels: [{name: m, provider: p, batch_mode: sometimes}]\n",
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

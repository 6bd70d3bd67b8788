"""An upstream too fast to be the bottleneck: Envoy answering every POST with a fixed chat
completion (`direct_response`), so a run measures batchgate's own ceiling."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import yaml

from batchgate.gateway.launcher import envoy_binary

TYPES = "type.googleapis.com/envoy.extensions.filters."
HCM_TYPE = TYPES + "network.http_connection_manager.v3.HttpConnectionManager"
ROUTER_TYPE = TYPES + "http.router.v3.Router"
BUFFER_TYPE = TYPES + "http.buffer.v3.Buffer"
ANSWER = {
    "id": "chatcmpl-fast",
    "object": "chat.completion",
    "created": 1767225600,
    "model": "bench-fast",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9},
}


def _config(port: int, admin_port: int) -> dict:
    route = {
        "match": {"prefix": "/"},
        "direct_response": {"status": 200, "body": {"inline_string": orjson.dumps(ANSWER).decode()}},
        "response_headers_to_add": [{"header": {"key": "content-type", "value": "application/json"}}],
    }
    manager = {
        "@type": HCM_TYPE,
        "stat_prefix": "fast",
        "codec_type": "AUTO",
        "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [route]}]},
        # Read the whole request before answering: a direct response sent while the body is still
        # arriving makes Envoy close the connection, and clients would reconnect for every call.
        "http_filters": [
            {
                "name": "envoy.filters.http.buffer",
                "typed_config": {"@type": BUFFER_TYPE, "max_request_bytes": 10 * 1024 * 1024},
            },
            {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER_TYPE}},
        ],
    }
    listener = {
        "name": "fast",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}
        ],
    }
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {"listeners": [listener]},
    }


@contextlib.contextmanager
def fast_upstream(workdir: Path, port: int, admin_port: int) -> Iterator[str]:
    """Run it; yields its base URL (…/v1)."""
    path = workdir / "fast-upstream.yaml"
    path.write_text(yaml.safe_dump(_config(port, admin_port)))
    process = subprocess.Popen(
        [
            envoy_binary(),
            "-c",
            str(path),
            "--log-level",
            "error",
            "--disable-hot-restart",
            "--concurrency",
            "1",
        ],
        start_new_session=True,
    )
    try:
        import httpx

        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=b"{}", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)

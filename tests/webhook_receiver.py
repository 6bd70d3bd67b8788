"""A real HTTP webhook receiver on loopback for tests: records every POST, answers as scripted.

with WebhookReceiver() as receiver:
    receiver.script("/flaky", "sleep:3", 500)   # 1st call hangs 3 s, 2nd gets 500, then 200s
    url = receiver.url("/flaky")
    ...
    calls = receiver.wait_for("/flaky", 3)
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_verifier() -> Callable[..., bool]:
    """`verify_batchgate_webhook` exactly as README.md shows receivers, so the docs stay true."""
    block = re.search(
        r"<!-- webhook-verify:begin -->\s*```python\n(.*?)```\s*<!-- webhook-verify:end -->",
        README.read_text(),
        re.S,
    )
    assert block, "README.md lost its webhook verification snippet"
    namespace: dict[str, Any] = {}
    exec(block.group(1), namespace)
    return namespace["verify_batchgate_webhook"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    at: float


class WebhookReceiver:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, list[str | int]] = defaultdict(list)
        self._received: dict[str, list[Received]] = defaultdict(list)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                path = self.path
                with receiver._lock:
                    receiver._received[path].append(
                        Received(path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                    )
                    script = receiver._scripts[path]
                    answer = script.pop(0) if script else 200
                if isinstance(answer, str) and answer.startswith("sleep:"):
                    time.sleep(float(answer.split(":", 1)[1]))
                    answer = 200
                try:
                    payload = b"ok" if int(answer) < 300 else b"receiver says no"
                    self.send_response(int(answer))
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the sender gave up (timeout) before the answer

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @staticmethod
    def fresh_path(name: str) -> str:
        """A path no other test uses (one receiver serves several tests and database kinds)."""
        return f"/{name}-{uuid.uuid4().hex[:12]}"

    def script(self, path: str, *answers: str | int) -> None:
        """Answers for the next calls to `path`: an HTTP status, or `sleep:<s>` (then 200)."""
        with self._lock:
            self._scripts[path].extend(answers)

    def received(self, path: str) -> list[Received]:
        with self._lock:
            return list(self._received[path])

    def wait_for(self, path: str, count: int, timeout_s: float = 60.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while len(calls := self.received(path)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: {len(calls)} of {count} webhook calls arrived")
            time.sleep(0.05)
        return calls

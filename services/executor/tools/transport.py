"""The executor's HTTP to tool servers: one aiohttp session for every tool request of the
process, held to the private-address policy (`tool_allowed_networks`).

Host names resolve through `GuardedResolver` (only allowed addresses, at every connection, so
a name that later points elsewhere reaches nothing private), literal addresses are checked
here, and redirects are not followed. Every request runs under the record's `timeout_ms` and
reads at most `MAX_ANSWER_BYTES`. Failures become `ToolFailure` with a message that names no
secret: the URL only as `safe_url` writes it, never a header. A traced record's request is a
`POST` client span (HTTP conventions, the trace context sent along).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp

from batchgate.services.common.config import Settings
from batchgate.services.common.guarded_resolver import GuardedResolver
from batchgate.services.common.webhook_urls import (
    RefusedUrl,
    address_allowed,
    split_url,
    tool_networks,
)
from batchgate.services.executor import spans
from batchgate.services.executor.tools.calls import ToolFailure

MAX_ANSWER_BYTES = 8 * 1024 * 1024
EVENT_STREAM = "text/event-stream"
Enough = Callable[[bytes], bool]
"""Whether an event stream read so far holds the answer the caller waits for."""


def to_the_end(_raw: bytes) -> bool:
    """An event stream read whole, to its end (the caller needs no part of it sooner)."""
    return False


KEEPALIVE_S = 30.0


@dataclass(frozen=True)
class ToolAnswer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class ToolTransport:
    def __init__(self, settings: Settings) -> None:
        self._allowed = tool_networks(settings)
        self._limit = settings.executor_concurrency
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        """Made on first use (it needs the running event loop)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit, keepalive_timeout=KEEPALIVE_S, resolver=GuardedResolver(self._allowed)
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None)
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _check_address(self, url: str) -> None:
        """A literal address in the URL is checked here (aiohttp resolves no literal)."""
        try:
            host, _port = split_url(url)
        except RefusedUrl as exc:
            raise ToolFailure(f"the tool URL is not usable: {exc}") from None
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return
        if not address_allowed(literal, self._allowed):
            raise ToolFailure(f"the tool server's address {host} is not allowed (tool_allowed_networks)")

    async def send(
        self,
        method: str,
        url: str,
        *,
        body: bytes,
        headers: dict[str, str],
        timeout_s: float,
        traced: bool,
        until: Enough = to_the_end,
    ) -> ToolAnswer:
        """One request; raises ToolFailure when no complete answer came back. An event stream
        is read until `until` holds of what has come (the answer is in: a server may keep it open)."""
        self._check_address(url)
        if not traced:
            return await self._exchange(method, url, body, headers, timeout_s, until)
        with spans.http_call(url, headers, len(body), method) as span:
            try:
                answer = await self._exchange(method, url, body, headers, timeout_s, until)
            except ToolFailure:
                spans.end_http(span, 0, None, "tool_request_failed")
                raise
            spans.end_http(span, answer.status, answer.headers, None)
            return answer

    async def _exchange(
        self, method: str, url: str, body: bytes, headers: dict[str, str], timeout_s: float, until: Enough
    ) -> ToolAnswer:
        where = spans.safe_url(url)
        try:
            async with (
                asyncio.timeout(timeout_s),
                self._http().request(
                    method, url, data=body, headers=headers, allow_redirects=False
                ) as response,
            ):
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind == EVENT_STREAM:
                    raw = await _events(response, where, until)
                else:
                    raw = await _body(response, where)
                return ToolAnswer(response.status, response.headers, raw)
        except TimeoutError:
            raise ToolFailure(f"{where} did not answer within {timeout_s:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ToolFailure(f"could not reach {where} ({type(exc).__name__})") from None
        except ValueError:  # aiohttp refuses the request itself (a header it cannot send)
            raise ToolFailure(f"the request to {where} could not be sent as given") from None


async def _events(response: aiohttp.ClientResponse, where: str, enough: Enough) -> bytes:
    """An event stream up to the first event after which `enough` holds (or its end): the MCP
    spec has a server close the stream once it has answered, but only as a SHOULD, and a
    stream kept open (keep-alive comments) had failed the round as "did not answer"."""
    raw = bytearray()
    async for chunk in response.content.iter_any():
        raw += chunk
        if len(raw) > MAX_ANSWER_BYTES:
            raise ToolFailure(f"the answer of {where} is over {MAX_ANSWER_BYTES // 2**20} MiB")
        if enough(bytes(raw)):  # streams are small: read again whole after each chunk
            break
    return bytes(raw)


async def _body(response: aiohttp.ClientResponse, where: str) -> bytes:
    """The whole answer, or ToolFailure once it passes `MAX_ANSWER_BYTES`: read no further, so a
    huge or endless answer costs at most the limit. `read(n)` would not do: it returns what is
    buffered (often one chunk), which cut large answers short; `readexactly` waits for them."""
    try:
        await response.content.readexactly(MAX_ANSWER_BYTES + 1)
    except asyncio.IncompleteReadError as short:
        return short.partial
    raise ToolFailure(f"the answer of {where} is over {MAX_ANSWER_BYTES // 2**20} MiB")

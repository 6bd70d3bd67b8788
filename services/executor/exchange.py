"""One HTTP exchange with an upstream: the POST of an item's request under the provider's time
limit, its answer read whole but never past what one result can hold.

A failed exchange is a `TransportFailure`: the time limit passing and the connection failing
are retried by the runner; an answer too large to keep (`response_too_large`) is not, since
the same call would answer as much again. The bound follows the gRPC message limit
(`message_budget.max_body_bytes`): an outcome past it could never reach results.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping

import aiohttp

from batchgate.services.executor.outcomes import TransportFailure
from batchgate.services.executor.upstream import UpstreamRequest

log = logging.getLogger(__name__)

Exchanged = tuple[int, Mapping[str, str], bytes] | TransportFailure
"""(status, headers, body) of the answer, or why there is none."""


async def post(
    session: aiohttp.ClientSession,
    request: UpstreamRequest,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    max_answer: int,
) -> Exchanged:
    try:
        async with (
            asyncio.timeout(timeout_s),
            session.post(request.url, data=request.content, headers=headers) as response,
        ):
            if (response.content_length or 0) > max_answer:  # not read at all
                return too_large(response.content_length or 0, max_answer)
            raw = await response.read()
            if len(raw) > max_answer:  # decompressed, or sent without a length
                return too_large(len(raw), max_answer)
            return response.status, response.headers, raw
    except TimeoutError:
        return TransportFailure("request_timeout", f"The upstream did not answer within {timeout_s:g} s.")
    except aiohttp.ClientError as exc:
        return unreachable(exc)


def unreachable(exc: aiohttp.ClientError) -> TransportFailure:
    """Why the exchange failed, as the caller's error line says it: the system's words for a
    failed connection (`Connection refused`), else the kind of failure, but never the
    upstream's address, which is the operator's (the exception's text and repr name it); a
    debug log line has all of it (each failed attempt: at info they would flood an outage)."""
    log.debug("upstream exchange failed: %s", exc)
    os_error = getattr(exc, "os_error", None)
    errno = os_error.errno if isinstance(os_error, OSError) else None
    why = os.strerror(errno) if errno else type(exc).__name__
    return TransportFailure("connection_error", f"Could not reach the upstream: {why}.")


def too_large(size: int, max_answer: int) -> TransportFailure:
    return TransportFailure(
        "response_too_large",
        f"The upstream's answer ({size} bytes) is over the {max_answer} bytes one result can "
        "hold; raise BATCHGATE_GRPC_MAX_MESSAGE_BYTES to keep larger answers.",
        retryable=False,
    )

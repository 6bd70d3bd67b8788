"""Hosting gRPC services: one server per service, the auth/error wrapper, health, shutdown.

Every server listens with mutual TLS (`tls`): a caller without a certificate of the cluster
CA is refused at the handshake. Every handler runs inside its method's `_Guard` (wrapped once,
as its servicer is added: `GuardingRegistry`), which checks that the
caller's certificate identity may call the method (`authz.ALLOWED_CALLERS`, else
PERMISSION_DENIED before anything runs), (for public services) verifies the API key and sets
`caller.current_principal`, decodes a REST call's query string into the request (see
`rest_input`), answers a request message that does not decode with INVALID_ARGUMENT (its
deserializer wrapped by `request_decoding`), and turns an `ApiError` (or any unexpected
exception) into a gRPC abort carrying the OpenAI error envelope for Envoy (see `errors`;
Anthropic's envelope on the Anthropic-shaped services, see `anthropic_errors`). Several
services can share one process (the embedded mode hosts ingest, scheduler and results
together), each on its own port with its own identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from batchgate.services.common import authz, errors, request_decoding, rest_input, rpc_tracing, tls
from batchgate.services.common.access_policy import require_scope
from batchgate.services.common.anthropic_errors import in_anthropic_shape, speaks_anthropic
from batchgate.services.common.caller import api_key_from_metadata, current_principal
from batchgate.services.common.config import Settings

if TYPE_CHECKING:  # for annotations only: `auth` loads the database layer, which the executor never needs
    from batchgate.services.common import auth

log = logging.getLogger(__name__)

PUBLIC_PREFIX = "/batchgate.v1."
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


KEEPALIVE_MS = 5_000
"""A connection with calls open is pinged this often, and dropped when a ping is not answered
within as long again: a frozen peer (a hung machine, a stopped process) keeps its TCP connection
and never fails a call, so without pings a call to it waits its whole deadline."""
MIN_PING_INTERVAL_MS = 1_000
"""A server accepts pings this often, with or without calls open: Envoy pings every connection
(`gateway/render.py`) and the services' channels every `KEEPALIVE_MS`. gRPC's own default (one
every 5 minutes, none without calls) answers more with GOAWAY `too_many_pings`."""


def channel_options(settings: Settings) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_send_message_length", settings.grpc_max_message_bytes),
        ("grpc.max_receive_message_length", settings.grpc_max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_MS),
        # gRPC waits for a ping's answer by this one, a minute by default, not keepalive_timeout.
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_MS),
        ("grpc.http2.max_pings_without_data", 0),
        # Reconnect quickly when a peer restarts (the default first backoff is a full second).
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]


def server_options(settings: Settings) -> list[tuple[str, Any]]:
    """A server's channel arguments: `channel_options` and its own."""
    return [
        *channel_options(settings),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
        # gRPC sets SO_REUSEPORT by default: a second process on a taken port would bind and
        # silently receive half the calls. Without it, a taken port is an error.
        ("grpc.so_reuseport", 0),
        # With BDP probing on, the receive window of a fast loopback stream grows until the
        # sender never waits: Envoy pushed a whole 200 MB upload into ingest's transport
        # buffers (~150 MiB of RSS) while it wrote the first MiBs. The fixed default window
        # (64 KiB per stream) keeps what a stream holds small; uploads ran no slower.
        ("grpc.http2.bdp_probe", 0),
        # Any request head Envoy took fits (see rest_input); soft = hard: no refusal at random.
        ("grpc.max_metadata_size", rest_input.FORWARDED_METADATA_MAX_BYTES),
        ("grpc.absolute_max_metadata_size", rest_input.FORWARDED_METADATA_MAX_BYTES),
    ]


@dataclass
class ServiceHost:
    """What a service package hands to `run_hosts`: its servicers and background loops."""

    name: str
    port: int
    register: Callable[[Registry], list[str]]
    """Adds the servicers; returns their full service names (for health)."""
    public: bool = False
    """Public services require an API key on every call."""
    background: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    """Loops started after the server and cancelled at shutdown."""
    before_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Graceful-stop hooks, awaited while the server still answers (e.g. drain work)."""
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Cleanup after the server stopped (close channels and clients)."""


async def _abort(context: grpc.aio.ServicerContext, exc: errors.ApiError, span: Any) -> None:
    rpc_tracing.set_rpc_status(span, exc.grpc_code, server=True)
    await context.abort(exc.grpc_code, exc.message, trailing_metadata=exc.trailing_metadata())


def _internal_error(method: str) -> errors.ApiError:
    log.exception("unhandled error in %s", method)
    return errors.ApiError(500, "The server had an error while processing your request.", "server_error")


def _check_caller(method: str, context: grpc.aio.ServicerContext) -> None:
    """PERMISSION_DENIED unless the peer's certificate names an identity allowed to call `method`."""
    auth_context = context.auth_context()
    if not authz.permitted(method, auth_context):
        who = ", ".join(sorted(authz.peer_identities(auth_context))) or "a caller without a known identity"
        raise errors.ApiError(403, f"{who} may not call {method}", "permission_denied")


class _Guard:
    """One method's wrapping: auth on entry, the REST query string, the server span, and every
    failure turned into an abort with the API's envelope. Built once per method, when its
    servicer is added (`GuardingRegistry`)."""

    def __init__(self, service: str, method: str, verifier: auth.KeyVerifier | None, authorize: bool) -> None:
        self._service = service
        self._method = method
        self._public = method.startswith(PUBLIC_PREFIX)
        self._verifier = verifier if self._public else None
        self._authorize = authorize
        self._anthropic = speaks_anthropic(method)

    async def _enter(self, context: grpc.aio.ServicerContext) -> None:
        if self._authorize:
            _check_caller(self._method, context)
        if self._verifier is not None:
            metadata = context.invocation_metadata() or ()
            caller = await self._verifier.verify(api_key_from_metadata(metadata))
            require_scope(self._method, caller.scopes)
            current_principal.set(caller)

    def _with_query(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """A REST call's query string (moved to metadata by Envoy) decoded into `request`.
        Routes with a body (an `http_body` field) take their parameters from the body (one sent
        as gzip that inflated to nothing is its 400 here, `rest_input.check_inflated`), and
        client-streaming calls (uploads) have no single request message. A request that did
        not decode (`request_decoding`) is its 400 here, once the caller has been checked."""
        if isinstance(request, request_decoding.Undecodable):
            raise request.error
        if not self._public or not isinstance(request, Message):
            return request
        if rest_input.BODY_FIELD in request.DESCRIPTOR.fields_by_name:
            rest_input.check_inflated(request, context.invocation_metadata() or ())
            return request
        for name, value in context.invocation_metadata() or ():
            if name == rest_input.QUERY_METADATA_KEY:
                text = value.decode("latin-1") if isinstance(value, bytes) else value
                rest_input.apply_query(request, text)
        return request

    async def _fail(self, context: grpc.aio.ServicerContext, exc: Exception, span: Any) -> NoReturn:
        """End the call for `exc` (called inside its `except`): an abort with the API's
        envelope for an `ApiError`, with a logged internal error for anything else; the
        handler's own abort passes through."""
        if not isinstance(exc, grpc.aio.AbortError):
            shaped = exc if isinstance(exc, errors.ApiError) else _internal_error(self._method)
            await _abort(context, in_anthropic_shape(shaped) if self._anthropic else shaped, span)
        raise exc  # `context.abort` raises AbortError; were it to return, the error still ends the call

    @contextlib.asynccontextmanager
    async def _guarded(self, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        """Around one call: the server span, auth on entry, and every failure an abort."""
        with rpc_tracing.server_span(self._service, self._method, context) as span:
            try:
                await self._enter(context)
                yield
            except Exception as exc:
                await self._fail(context, exc, span)
            rpc_tracing.set_rpc_status(span, grpc.StatusCode.OK, server=True)

    def unary(self, behaviour: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with self._guarded(context):
                return await behaviour(self._with_query(request, context), context)

        return call

    def streaming(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.isasyncgenfunction(behaviour):  # writes with context.write (health's Watch)
            return self.unary(behaviour)

        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with self._guarded(context):
                async for message in behaviour(self._with_query(request, context), context):
                    yield message

        return call

    def handler(self, found: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """`found`, the servicer's handler of this method, running inside the guard."""
        serializers = {
            "request_deserializer": request_decoding.guarded(
                found.request_deserializer, found.request_streaming
            ),
            "response_serializer": found.response_serializer,
        }
        if found.unary_unary:
            return grpc.unary_unary_rpc_method_handler(self.unary(found.unary_unary), **serializers)
        if found.stream_unary:
            return grpc.stream_unary_rpc_method_handler(self.unary(found.stream_unary), **serializers)
        if found.unary_stream:
            return grpc.unary_stream_rpc_method_handler(self.streaming(found.unary_stream), **serializers)
        return grpc.stream_stream_rpc_method_handler(self.streaming(found.stream_stream), **serializers)


class Registry(Protocol):
    """What a servicer is added to (the generated `add_…_to_server` functions call these)."""

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Sequence[grpc.GenericRpcHandler]) -> None: ...

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None: ...


class _GuardedHandlers(grpc.GenericRpcHandler):
    """A servicer's generic handler whose methods run inside their `_Guard`, each guarded
    the first time it is looked up (only methods the servicer has are kept)."""

    def __init__(self, inner: grpc.GenericRpcHandler, guard: Callable[[str], _Guard]) -> None:
        self._inner = inner
        self._guard = guard
        self._guarded: dict[str, grpc.RpcMethodHandler] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        guarded = self._guarded.get(method)
        if guarded is None:
            found = self._inner.service(handler_call_details)
            if found is None:
                return None
            guarded = self._guarded[method] = self._guard(method).handler(found)
        return guarded


class GuardingRegistry:
    """The server as `ServiceHost.register` sees it: every handler a servicer adds runs inside
    its method's `_Guard`, wrapped here once. A gRPC aio server interceptor did the same on
    every call, with a coroutine and a new handler each time: 222 against 202 µs of the
    server's CPU per health check (bench/README, "The guard wrapped once per method")."""

    def __init__(
        self, server: grpc.aio.Server, service: str, verifier: auth.KeyVerifier | None, authorize: bool
    ) -> None:
        self._server = server
        self._service = service
        self._verifier = verifier
        self._authorize = authorize

    def _guard(self, method: str) -> _Guard:
        return _Guard(self._service, method, self._verifier, self._authorize)

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(
            tuple(_GuardedHandlers(handler, self._guard) for handler in generic_rpc_handlers)
        )

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self._server.add_registered_method_handlers(
            service_name,
            {
                name: self._guard(f"/{service_name}/{name}").handler(found)
                for name, found in method_handlers.items()
            },
        )


_Started = tuple[ServiceHost, grpc.aio.Server, health_aio.HealthServicer, list[str]]


async def _start(
    host: ServiceHost, settings: Settings, verifier: auth.KeyVerifier | None, material: Any
) -> _Started:
    """Listen and serve `host`, all its names answering SERVING to health checks."""
    server = grpc.aio.server(options=server_options(settings))
    registry = GuardingRegistry(server, host.name, verifier if host.public else None, material is not None)
    names = host.register(registry)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, registry)
    address = f"{settings.host}:{host.port}"
    try:  # gRPC answers a failed bind with 0 or with RuntimeError, by version
        if material is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, tls.server_credentials(material))
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise RuntimeError(f"{host.name}: cannot listen on {settings.host}:{host.port} (taken?)")
    await server.start()
    for name in ["", *names]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("%s serving on %s (%s)", host.name, address, "mutual TLS" if material else "PLAINTEXT")
    return host, server, health, names


async def _until_stopped(stop: asyncio.Event, tasks: list[asyncio.Task[None]]) -> None:
    """Wait for `stop`; a background loop may end, and one that fails ends the process."""
    waiter = asyncio.create_task(stop.wait())
    pending: set[asyncio.Task[Any]] = {waiter, *tasks}
    while not waiter.done():
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not waiter and not task.cancelled() and (failure := task.exception()) is not None:
                raise failure


async def _shut_down(started: list[_Started], tasks: list[asyncio.Task[None]], grace_s: float) -> None:
    """NOT_SERVING first, then the graceful-stop hooks, the loops, the servers, the clean-ups."""
    for _host, _server, health, names in started:
        for name in ["", *names]:
            await health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    for host, *_ in started:
        for hook in host.before_stop:
            try:
                await asyncio.wait_for(hook(), grace_s * 3)
            except Exception:
                log.exception("%s: graceful stop failed", host.name)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(server.stop(grace_s) for _h, server, _hs, _n in started))
    for host, *_ in started:
        for hook in host.on_stop:
            await hook()


async def run_hosts(
    hosts: Sequence[ServiceHost],
    settings: Settings,
    verifier: auth.KeyVerifier | None,
    stop: asyncio.Event | None = None,
    grace_s: float = 5.0,
) -> None:
    """Serve every host until SIGINT/SIGTERM (or `stop` is set), then shut down gracefully.
    The two signals are handed back as they were when it returns: the handlers are the
    process's, and a process that forks later (or serves again) must not inherit ours."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await _serve(hosts, settings, verifier, stop, grace_s)
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)  # resets the signal to its default
                if handler is not None:
                    signal.signal(sig, handler)


async def _serve(
    hosts: Sequence[ServiceHost],
    settings: Settings,
    verifier: auth.KeyVerifier | None,
    stop: asyncio.Event,
    grace_s: float,
) -> None:
    started: list[_Started] = []
    tasks: list[asyncio.Task[None]] = []
    if settings.insecure_internal:
        log.warning(tls.INSECURE_WARNING)
    # Every host's material is read before anything listens: missing files stop the process here.
    materials = {host.name: tls.material(settings, host.name) for host in hosts}
    try:
        for host in hosts:
            started.append(await _start(host, settings, verifier, materials[host.name]))
            tasks += [asyncio.create_task(loop_fn(), name=f"{host.name}-bg") for loop_fn in host.background]
        await _until_stopped(stop, tasks)
    finally:
        await _shut_down(started, tasks, grace_s)

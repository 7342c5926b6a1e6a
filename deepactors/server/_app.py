"""``create_app``: an ASGI app serving agents on the LangGraph Agent Protocol."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from .._core.pacing import DEFAULT_QUANTUM
from ..agent import DeepAgent
from ..errors import ConfigurationError, DeepActorsError, InputError
from ..persistence import Checkpointer, MemoryCheckpointer, MemoryStore, Store
from ..tracing import Tracing, attach_traceparent, detach_traceparent
from ._authz import CALLER, IDENTITY_KEY, OPEN_PATHS, authenticate
from ._guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_STREAMS_PER_CLIENT,
    LOOPBACK_HOSTS,
    Guard,
    StreamKey,
    close_if_unread,
    normal_origin,
)
from ._lifespan import AppLifespan, open_relay
from ._misc_api import misc_routes
from ._openapi import openapi_routes
from ._records import AssistantRecord
from ._responses import auth_error_response, error_response
from ._retention import DEFAULT_RUN_RETENTION
from ._run_slots import DEFAULT_MAX_RUNS_PER_CLIENT, RunSlots
from ._runs_api import run_routes, serve_stream, stream_target
from ._thread_ops import thread_op_routes
from ._thread_stream import thread_stream_routes
from ._thread_ttl import DEFAULT_THREAD_TTL_SWEEP, ThreadTTL
from ._threads_api import thread_routes
from ._ui import ui_routes
from ._wire_json import TTLStrategy
from .a2a import a2a_routes
from .agui import agui_routes
from .aisdk import aisdk_routes
from .auth import Auth, AuthError
from .crons import CronBook, MemoryCronBook, cron_routes
from .relay import DEFAULT_STREAM_LOG_BYTES, FOLLOW_PATIENCE
from .v3 import thread_session_routes
from .webhooks import DEFAULT_WEBHOOKS, Webhooks

__all__ = ["create_app"]


def create_app(
    agents: DeepAgent | Mapping[str, DeepAgent],
    *,
    checkpointer: Checkpointer | None = None,
    store: Store | None = None,
    idle_timeout: float = 300.0,
    run_retention: float | None = DEFAULT_RUN_RETENTION,
    cors_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
    max_body: int = DEFAULT_MAX_BODY,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    max_streams_per_client: int | None = DEFAULT_MAX_STREAMS_PER_CLIENT,
    stream_key: StreamKey | None = None,
    max_runs_per_client: int | None = DEFAULT_MAX_RUNS_PER_CLIENT,
    trusted_proxies: Sequence[str] = (),
    auth: Auth | None = None,
    runs_db: str | None = None,
    runs_db_patience: float = FOLLOW_PATIENCE,
    pacing: float | None = DEFAULT_QUANTUM,
    defer_gc: bool = False,
    tracing: Tracing | bool = True,
    stream_log_bytes: int = DEFAULT_STREAM_LOG_BYTES,
    webhooks: Webhooks | None = DEFAULT_WEBHOOKS,
    crons: CronBook | None = None,
    thread_ttl: float | None = None,
    thread_ttl_strategy: TTLStrategy = "delete",
    thread_ttl_sweep: float = DEFAULT_THREAD_TTL_SWEEP,
) -> Starlette:
    """An ASGI app that serves ``agents`` on the LangGraph Agent Protocol.

    ``langgraph-sdk`` clients, Agent Chat UI and deep-agents-ui talk to it
    unchanged. Every run is an actor of one runtime, opened in the app's
    lifespan; a client that disconnects from a streamed run cancels that run's
    whole subtree (unless it asked for ``on_disconnect="continue"``), and
    shutting the app down cancels every run and waits for it. An agent whose
    backend is a sandbox (``BubblewrapSandbox``) has it opened when the app
    starts (a sandbox that cannot run here stops the start) and closed after the
    runs; with ``auth``, each thread's workspace is keyed by its owner too.

    Args:
        agents: One agent (served as its name) or several by assistant id.
        checkpointer: Where threads are saved, for agents that have no
            checkpointer of their own (default: in memory, for this process).
            When every assistant saves to one SQLite file, threads' metadata
            (owners among it) is kept there too, so a restart keeps it.
        store: The store of the ``/store`` endpoints, and of agents that have
            none of their own. None: one in memory (as ``langgraph dev`` has),
            gone when the app stops; ``deepactors serve --db`` keeps it there.
        idle_timeout: Seconds a thread's actor keeps its state in memory, and
            what was read of the thread for requests (then read back from the
            checkpointer when a request needs it).
        run_retention: Seconds a finished run's record (its values, its input)
            stays in memory for clients to join or read it; None: for ever.
            Then a run of a thread keeps only its status, times, metadata and
            error (``GET`` and ``/join`` still answer, ``/join`` with the
            thread's values from the checkpointer); a stateless run is gone
            with its thread when it ends. See ``docs/server-memory.md``.
        cors_origins: Origins web pages may call from (Agent Chat UI in a
            browser: ``http://localhost:3000``), or ``*`` for any. None by
            default: a request with any other ``Origin`` than the server's own
            is refused (403) before anything runs, so a page the user opens
            cannot drive the agents.
        allowed_hosts: What the ``Host`` header may name (421 otherwise), so a
            page whose DNS name is re-bound to this machine is refused: a name
            (any port) or ``name:port``; ``*`` allows any (behind a proxy that
            checks it). Default: this machine's loopback names.
        max_body: Bytes a request body may have (413 past it, from its declared
            length at once, else as it streams in: never buffered beyond it).
        body_timeout: Seconds a request body may take to arrive (408 after).
        max_streams_per_client: Streams, waits and joins one client may have
            open at once (429 past it); None: no cap.
        stream_key: Who a request counts against for that cap and for
            ``max_runs_per_client``, from its ASGI scope (None: not counted);
            default: the caller's identity with ``auth``, else the client's
            address (a trusted proxy's client's: ``trusted_proxies``).
        max_runs_per_client: Runs one client may have in flight at once,
            whatever their kind (streamed, waited for, in the background,
            stateless, queued on a thread); past it a new run is refused with
            429 and ``Retry-After`` before anything of it is done. None: no cap.
        trusted_proxies: Addresses or networks (``10.0.0.0/8``; ``*``: any) of
            reverse proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto``
            are believed, as uvicorn's ``--forwarded-allow-ips``: a request from
            one is the client's it names (its address keys the caps, its scheme
            is the origin's). From any other peer they are ignored. None by
            default: run uvicorn with ``proxy_headers=False`` (``deepactors
            serve`` does), or it believes them from 127.0.0.1 itself.
        auth: Who may call, and what each caller may touch (see
            :mod:`deepactors.server.auth`): every request but the health check
            is authenticated first (401 otherwise), and threads, runs and store
            namespaces are their owner's. None: no authentication, for a server
            on 127.0.0.1 that only its own user reaches.
        runs_db: A PostgreSQL DSN through which several server processes share
            their runs: a run created through one can be found, joined,
            streamed and cancelled through any other. None: runs are this
            process's own (no database is asked anything about them).
        runs_db_patience: Seconds this process keeps trying to follow a run of
            another process (a client waiting on it, joining or rejoining its
            stream) while the runs database is unreachable; then the run ends
            here as an error that says so, so the client is answered in bounded
            time. The run goes on in its own process meanwhile.
        pacing: Seconds of agent steps per event-loop turn, as for
            :func:`~deepactors.open_runtime`: what bounds how long a burst of
            runs keeps the server from reading requests and writing streams.
        defer_gc: Defer CPython's collections of objects alive while runs are
            in progress, as for :func:`~deepactors.open_runtime`: a burst of
            1,000 streams otherwise spends ~30% of its first quarter second in
            young collections that find nothing, and a middle-generation one
            can pause the server for 0.4 s. Process-wide, hence off here;
            ``deepactors serve`` turns it on.
        tracing: OpenTelemetry traces and metrics of the runs, as for
            :func:`~deepactors.open_runtime` (on whenever a provider is set);
            a request's ``traceparent`` header makes its run part of the
            caller's trace.
        stream_log_bytes: Bytes of SSE frames a resumable run keeps for clients
            that rejoin it (``Last-Event-ID``); past it the oldest are dropped,
            and a client that asks for one of those is told so (410).
        webhooks: How the server calls the ``webhook`` a run names when it
            ends (see :mod:`deepactors.server.webhooks`): by default unsigned,
            to hosts that resolve to public addresses only. None: a run that
            names a webhook is refused (422).
        crons: Where scheduled runs are kept (see :mod:`deepactors.server.crons`);
            None: in memory, gone when the app stops. ``deepactors serve --db``
            keeps them in its database.
        thread_ttl: Seconds a thread lives after its last change (made,
            patched, its state updated, a run ended) unless made with a ``ttl``
            of its own; then it is deleted, never while a run of it is in
            flight. None (the default): threads live until deleted.
        thread_ttl_strategy: What happens to such a thread: ``"delete"`` (the
            default), or ``"keep_latest"``: its history is dropped and its
            latest state kept (``ThreadHandle.keep_latest``), once per change.
        thread_ttl_sweep: Seconds between two sweeps for expired threads.

    Requests with a body must send it as ``application/json`` (or with no
    type): anything else is refused (415), so an HTML form or a ``text/plain``
    fetch, which a page may send to another site without asking, never
    starts a run.

    Raises:
        ConfigurationError: No agent, a bad assistant id, a ``runs_db``
            that is not PostgreSQL, or a bad limit.
    """
    open_relay(runs_db, runs_db_patience)  # bad options fail here, not in the lifespan
    _check_keywords(
        cors_origins=cors_origins,
        allowed_hosts=allowed_hosts,
        stream_log_bytes=stream_log_bytes,
        run_retention=run_retention,
        auth=auth,
    )
    expiry = ThreadTTL(thread_ttl, thread_ttl_strategy, thread_ttl_sweep)
    origins = [normal_origin(o) for o in cors_origins]
    if auth is not None and stream_key is None:
        stream_key = _identity_key
    slots = RunSlots(max_runs_per_client)  # a bad cap fails here, not in the lifespan
    proxies = _trusted(trusted_proxies)
    guard = Guard(
        cors_origins=origins,
        allowed_hosts=allowed_hosts,
        max_body=max_body,
        body_timeout=body_timeout,
        max_streams_per_client=max_streams_per_client,
        stream_key=stream_key,
        count_runs=slots.cap is not None,
    )
    store = store if store is not None else MemoryStore()
    assistants = _assistants(agents, checkpointer, store)
    app = _AgentApp(
        guard,
        auth,
        proxies,
        routes=_ROUTES,
        lifespan=AppLifespan(
            assistants=assistants,
            guard=guard,
            auth=auth,
            store=store,
            crons=crons if crons is not None else MemoryCronBook(),
            webhooks=webhooks,
            max_runs_per_client=slots.cap,
            thread_ttl=expiry,
            runs_db=runs_db,
            runs_db_patience=runs_db_patience,
            idle_timeout=idle_timeout,
            run_retention=run_retention,
            pacing=pacing,
            defer_gc=defer_gc,
            tracing=tracing,
            stream_log_bytes=stream_log_bytes,
        ),
        exception_handlers={
            HTTPException: _error,
            InputError: _error,
            DeepActorsError: _error,
        },
        middleware=_cors(origins),
    )
    app.state.store = store
    return app


# Starlette tries routes in order: the runs' (the hot paths) first.
_ROUTES = [
    *thread_op_routes,  # before /threads/{id} and /runs/{...}: literal paths first
    *run_routes,
    *thread_routes,
    *thread_stream_routes,
    *thread_session_routes,  # the v3 session: client.threads.stream
    *cron_routes,
    *misc_routes,
    *openapi_routes,
    *ui_routes,
    # The other protocols' endpoints (AG-UI, the AI SDK's stream, A2A).
    *agui_routes,
    *aisdk_routes,
    *a2a_routes,
]


def _check_keywords(
    *,
    cors_origins: Sequence[str],
    allowed_hosts: Sequence[str],
    stream_log_bytes: int,
    run_retention: float | None,
    auth: Auth | None,
) -> None:
    """Refuse the keywords of :func:`create_app` that no part they configure checks.

    Raises:
        ConfigurationError: A bare string for a sequence of them, a byte count or
            a retention out of range, an ``auth`` that is not an ``Auth``.
    """
    if isinstance(cors_origins, str) or isinstance(allowed_hosts, str):
        raise ConfigurationError("cors_origins and allowed_hosts are sequences of strings")
    if not stream_log_bytes > 0:
        raise ConfigurationError(f"stream_log_bytes: bytes > 0, not {stream_log_bytes!r}")
    if run_retention is not None and not run_retention >= 0:  # NaN too
        raise ConfigurationError(f"run_retention: seconds >= 0, or None, not {run_retention!r}")
    if auth is not None and not isinstance(auth, Auth):
        raise ConfigurationError(f"auth: a deepactors.server.auth.Auth, not {auth!r}")


def _assistants(
    agents: DeepAgent | Mapping[str, DeepAgent],
    checkpointer: Checkpointer | None,
    store: Store | None,
) -> dict[str, AssistantRecord]:
    """The served assistants by id; an agent with no checkpointer or store gets the server's.

    Raises:
        ConfigurationError: No agent, one that is not a DeepAgent, or a bad id.
    """
    if isinstance(agents, DeepAgent):
        agents = {agents.name: agents}
    if not agents:
        raise ConfigurationError("create_app needs at least one agent")
    saver = checkpointer if checkpointer is not None else MemoryCheckpointer()
    assistants: dict[str, AssistantRecord] = {}
    for graph_id, agent in agents.items():
        if not isinstance(agent, DeepAgent):
            raise ConfigurationError(f"assistant {graph_id!r}: not a DeepAgent: {agent!r}")
        if not graph_id or "/" in graph_id:
            raise ConfigurationError(f"assistant id {graph_id!r} must be non-empty, without '/'")
        assistants[graph_id] = AssistantRecord(
            graph_id=graph_id, agent=_served(agent, saver, store)
        )
    return assistants


def _cors(origins: list[str]) -> list[Middleware]:
    """Starlette's CORS middleware for ``origins``; none when no origin is allowed."""
    if not origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Content-Location", "Location", "X-Pagination-Next"],
        )
    ]


class _AgentApp(Starlette):
    """Starlette, with the streaming-run endpoints answered ahead of its stack.

    ``POST /runs/stream`` and ``POST /threads/{id}/runs/stream`` are what a burst
    of clients hits at once; each request through the middleware stack and the
    router costs ~50 us more, which the last of 1,000 simultaneous requests
    waits for 1,000 times over. They are served directly (same checks, errors
    and responses) as long as the app is as ``create_app`` built it: a request
    with an ``Origin`` (CORS), a middleware or exception handler added since,
    or an app mounted under a path, takes the regular way.

    Every HTTP request, either way, first passes the guard (``_guard``: Host,
    Origin, body type, size and time, streams per client); one from a trusted
    proxy is first made the client's it forwards.
    """

    def __init__(
        self, guard: Guard, auth: Auth | None, proxies: list[str] | None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._as_built = (list(self.user_middleware), dict(self.exception_handlers))
        self.guard = guard
        self.auth = auth
        guard.app = self.dispatch
        # uvicorn's own reading of the headers, as its --forwarded-allow-ips
        # reads them (pure Python, on either loop), from these peers only.
        inner: Any = self._http  # (uvicorn types its ASGI callables its own way)
        self._forwarded: Any = (
            None if proxies is None else ProxyHeadersMiddleware(inner, trusted_hosts=proxies)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
        elif self._forwarded is not None:
            await self._forwarded(scope, receive, send)  # then _http, as the client's
        else:
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The caller's trace (W3C traceparent), current while the request is
        # served: a run it starts is ordered here, and its spans join that trace.
        trace = attach_traceparent(scope["headers"])
        if trace is None:
            await self._admit(scope, receive, send)
            return
        try:
            await self._admit(scope, receive, send)
        finally:
            detach_traceparent(trace)

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        auth = self.auth
        # A CORS preflight carries no credentials (browsers never send them).
        if auth is None or scope["path"] in OPEN_PATHS or scope["method"] == "OPTIONS":
            await self.guard(scope, receive, send)
            return
        try:
            identity = await authenticate(auth, scope)
        except AuthError as exc:
            await auth_error_response(exc, close_if_unread(scope))(scope, receive, send)
            return
        scope[IDENTITY_KEY] = identity
        # Set for this request's task (and the tasks it starts): every lookup
        # of the run manager reads it, so no endpoint can forget to check.
        token = CALLER.set((auth, identity))
        try:
            await self.guard(scope, receive, send)
        finally:
            CALLER.reset(token)

    async def dispatch(self, scope: Scope, receive: Receive, send: Send, origin: bool) -> None:
        """Serve an HTTP request the guard admitted (``origin``: it carries one)."""
        direct, thread_id = stream_target(scope)
        manager = getattr(self.state, "runs", None)
        if (
            direct
            and manager is not None
            and not origin
            and (self.user_middleware, self.exception_handlers) == self._as_built
        ):
            scope["app"] = self
            await serve_stream(manager, thread_id, scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _trusted(proxies: Sequence[str]) -> list[str] | None:
    """``trusted_proxies`` checked (None: none).

    Raises:
        ConfigurationError: An entry that is neither an address, a network nor ``*``
            (uvicorn would take it as a name no peer ever has, silently).
    """
    if isinstance(proxies, str):
        raise ConfigurationError("trusted_proxies is a sequence of strings")
    out = [p.strip() for p in proxies]
    for entry in out:
        try:
            if entry != "*":
                if "/" in entry:
                    ipaddress.ip_network(entry)
                else:
                    ipaddress.ip_address(entry)
        except ValueError as exc:
            raise ConfigurationError(
                f"trusted_proxies: an IP address, a network (10.0.0.0/8) or '*', not "
                f"{entry!r} ({exc})"
            ) from None
    return out or None


def _identity_key(scope: Scope) -> Hashable:
    identity = scope.get(IDENTITY_KEY)
    return None if identity is None else identity.id


def _served(agent: DeepAgent, checkpointer: Checkpointer, store: Store | None) -> DeepAgent:
    """The agent with the server's checkpointer and store where it has none."""
    spec = agent.spec
    saver = spec.checkpointer if spec.checkpointer is not None else checkpointer
    keep = spec.store if spec.store is not None else store
    if saver is spec.checkpointer and keep is spec.store:
        return agent
    return DeepAgent(dataclasses.replace(spec, checkpointer=saver, store=keep))


async def _error(request: Request, exc: Exception) -> Response:
    response = error_response(exc, request.url.path)
    assert response is not None  # registered only for the errors it answers
    return response

"""``create_app``: an ASGI app serving agents on the LangGraph Agent Protocol."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from ..agent import DeepAgent
from ..errors import ConfigurationError, DeepActorsError, InputError
from ..persistence import Checkpointer, MemoryCheckpointer, MemoryStore, Store
from ..tracing import attach_traceparent, detach_traceparent
from ._authz import CALLER, IDENTITY_KEY, OPEN_PATHS, authenticate
from ._guard import Guard, close_if_unread
from ._lifespan import AppLifespan, open_relay
from ._misc_api import misc_routes
from ._openapi import openapi_routes
from ._options import AppOptions, AppSettings
from ._records import AssistantRecord
from ._responses import auth_error_response, error_response
from ._runs_api import run_routes, serve_stream, stream_target
from ._thread_ops import thread_op_routes
from ._thread_stream import thread_stream_routes
from ._threads_api import thread_routes
from ._ui import ui_routes
from .a2a import a2a_routes
from .agui import agui_routes
from .aisdk import aisdk_routes
from .auth import Auth, AuthError
from .crons import CronBook, MemoryCronBook, cron_routes
from .v3 import thread_session_routes
from .webhooks import DEFAULT_WEBHOOKS, Webhooks

__all__ = ["create_app"]


def create_app(
    agents: DeepAgent | Mapping[str, DeepAgent],
    *,
    checkpointer: Checkpointer | None = None,
    store: Store | None = None,
    auth: Auth | None = None,
    runs_db: str | None = None,
    webhooks: Webhooks | None = DEFAULT_WEBHOOKS,
    crons: CronBook | None = None,
    **options: Unpack[AppOptions],
) -> Starlette:
    """An ASGI app that serves ``agents`` on the LangGraph Agent Protocol.

    ``langgraph-sdk`` clients, Agent Chat UI and deep-agents-ui talk to it
    unchanged. Every run is an actor of one runtime, opened in the app's
    lifespan; a client that disconnects from a streamed run cancels that run's
    whole subtree (unless it asked for ``on_disconnect="continue"``), and
    shutting the app down cancels every run and waits for it. Sandboxed
    backends are opened when the app starts (one that cannot run here stops
    the start) and closed after the runs. Request bodies are JSON only (415
    otherwise), so a page's form post never starts a run.

    Args:
        agents: One agent (served as its name) or several by assistant id.
        checkpointer: Where threads are saved, for agents that have no
            checkpointer of their own (default: in memory, for this process).
            When every assistant saves to one SQLite file, threads' metadata
            (owners among it) is kept there too, so a restart keeps it.
        store: The store of the ``/store`` endpoints, and of agents that have
            none of their own. None: one in memory (as ``langgraph dev`` has),
            gone when the app stops; ``deepactors serve --db`` keeps it there.
        auth: Who may call, and what each caller may touch (see
            :mod:`deepactors.server.auth`): every request but the health check
            is authenticated first (401 otherwise), and threads, runs, store
            namespaces and sandbox workspaces are their owner's. None: no
            authentication, for a server on 127.0.0.1 that only its own user reaches.
        runs_db: A PostgreSQL DSN through which several server processes share
            their runs: a run created through one can be found, joined,
            streamed and cancelled through any other. None: runs are this
            process's own (no database is asked anything about them).
        webhooks: How the server calls the ``webhook`` a run names when it
            ends (see :mod:`deepactors.server.webhooks`): by default unsigned,
            to hosts that resolve to public addresses only. None: a run that
            names a webhook is refused (422).
        crons: Where scheduled runs are kept (see :mod:`deepactors.server.crons`);
            None: in memory, gone when the app stops. ``deepactors serve --db``
            keeps them in its database.
        **options: The request guard's limits (CORS origins, allowed hosts,
            bodies, streams and runs per client, trusted proxies), what stays in
            memory and for how long, threads' time to live, and the runtime's
            knobs: each documented in :class:`~deepactors.server.AppOptions`.

    Raises:
        ConfigurationError: No agent, a bad assistant id, a ``runs_db``
            that is not PostgreSQL, or a bad option.
        TypeError: A keyword it does not take.
    """
    settings = AppSettings.parse(options, auth=auth)
    open_relay(runs_db, settings.runs_db_patience)  # bad options fail here, not in the lifespan
    store = store if store is not None else MemoryStore()
    lifespan = AppLifespan(
        assistants=_assistants(agents, checkpointer, store),
        guard=_guard(settings),
        auth=auth,
        store=store,
        crons=crons if crons is not None else MemoryCronBook(),
        webhooks=webhooks,
        runs_db=runs_db,
        settings=settings,
    )
    app = _AgentApp(lifespan, settings.trusted_proxies, middleware=_cors(settings.cors_origins))
    app.state.store = store
    return app


def _guard(settings: AppSettings) -> Guard:
    """The request guard the settings describe."""
    return Guard(
        cors_origins=settings.cors_origins,
        allowed_hosts=settings.allowed_hosts,
        max_body=settings.max_body,
        body_timeout=settings.body_timeout,
        max_streams_per_client=settings.max_streams_per_client,
        stream_key=settings.stream_key,
        count_runs=settings.max_runs_per_client is not None,
    )


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


def _cors(origins: Sequence[str]) -> list[Middleware]:
    """Starlette's CORS middleware for ``origins``; none when no origin is allowed."""
    if not origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=list(origins),
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
        self, lifespan: AppLifespan, proxies: Sequence[str] | None, middleware: list[Middleware]
    ) -> None:
        super().__init__(
            routes=_ROUTES,
            lifespan=lifespan,
            exception_handlers=dict.fromkeys((HTTPException, InputError, DeepActorsError), _error),
            middleware=middleware,
        )
        self._as_built = (list(self.user_middleware), dict(self.exception_handlers))
        self.guard = guard = lifespan.guard
        self.auth = lifespan.auth
        guard.app = self.dispatch
        # uvicorn's own reading of the headers, as its --forwarded-allow-ips
        # reads them (pure Python, on either loop), from these peers only.
        inner: Any = self._http  # (uvicorn types its ASGI callables its own way)
        self._forwarded: Any = (
            None if proxies is None else ProxyHeadersMiddleware(inner, trusted_hosts=list(proxies))
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

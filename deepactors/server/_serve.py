"""``deepactors serve``: run the app under uvicorn (asyncio) or hypercorn (trio)."""

from __future__ import annotations

import gc
import importlib
import inspect
import ipaddress
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, final

import trio
import uvicorn
from hypercorn.config import Config as HypercornConfig
from starlette.applications import Starlette

from .._core.asgi import asgi_server_for
from .._core.logs import configure_logging, get_logger, logging_config
from ..errors import ConfigurationError
from ..persistence import (
    Checkpointer,
    MemoryStore,
    Store,
    is_postgres_url,
    open_checkpointer,
    open_store,
)
from ._app import create_app
from ._guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_STREAMS_PER_CLIENT,
    LOOPBACK_HOSTS,
    check_limits,
)
from ._langgraph_json import (
    CONFIG_FILE,
    expiring,
    indexed,
    load_agents,
    thread_expiry,
    with_server_persistence,
)
from ._records import TTLStrategy
from ._retention import DEFAULT_RUN_RETENTION
from ._run_slots import DEFAULT_MAX_RUNS_PER_CLIENT, RunSlots
from ._uvicorn_http import HeadTimeoutProtocol
from .auth import Auth, api_keys
from .crons import open_cron_book
from .relay import DEFAULT_STREAM_LOG_BYTES
from .webhooks import Webhooks

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework

__all__ = ["ServeOptions", "load_agents", "load_auth", "serve", "tune_gc"]

_TARGET_ENV = "DEEPACTORS_SERVE_TARGET"
_DB_ENV = "DEEPACTORS_SERVE_DB"
_RUNS_DB_ENV = "DEEPACTORS_SERVE_RUNS_DB"
_AUTH_ENV = "DEEPACTORS_SERVE_AUTH"
_LIMITS_ENV = "DEEPACTORS_SERVE_LIMITS"
GRACEFUL_SECONDS = 3.0
"""How long open streams may run on at shutdown before their runs are cancelled."""
DEFAULT_IDLE_TIMEOUT = 300.0
"""``create_app``'s ``idle_timeout``."""
DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a request's headers, from its opening or from
its previous response (so also how long an idle kept-alive one stays open): more
than the 5 s httpx keeps an idle connection, so a client never reuses one the
server is closing."""
BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (uvicorn's default;
hypercorn's is 100)."""

_log = get_logger("deepactors.server")

WEBHOOK_SECRET_ENV = "DEEPACTORS_WEBHOOK_SECRET"
"""The environment variable ``deepactors serve`` reads webhooks' signing secret from."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """What ``deepactors serve`` was asked for."""

    target: str | None = None
    host: str = "127.0.0.1"
    port: int = 2024
    db: str | None = None
    loop: str = "asyncio"
    workers: int = 1
    runs_db: str | None = None
    log_level: str | None = "info"
    """Root logger level, ``debug`` to ``critical``; None leaves logging as configured."""
    log_format: str = "console"
    """``console`` lines or ``json`` lines, on stderr."""
    cors_origins: tuple[str, ...] = ()
    """Origins web pages may call from (``*``: any); none by default."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names served besides ``localhost``, ``127.0.0.1``, ``[::1]`` and
    ``host``, which are served at ``port``; ``*``: any."""
    max_body: int = DEFAULT_MAX_BODY
    """Bytes a request body may have (413)."""
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    """Seconds a request body may take to arrive (408)."""
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    """Seconds a connection may take to send a request's headers (see
    :data:`DEFAULT_HEADER_TIMEOUT`); then it is closed."""
    max_streams_per_client: int | None = DEFAULT_MAX_STREAMS_PER_CLIENT
    """Streams, waits and joins one client (its identity, else its address) may have
    open at once (429); None: no cap."""
    max_runs_per_client: int | None = DEFAULT_MAX_RUNS_PER_CLIENT
    """Runs one client (its identity, else its address) may have in flight at once,
    background runs included (429 with ``Retry-After``); None: no cap."""
    trusted_proxies: tuple[str, ...] = ()
    """Reverse proxies (addresses, networks, ``*``) whose ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` are believed (as uvicorn's ``--forwarded-allow-ips``); none
    by default, on both servers."""
    auth: str | None = None
    """How clients authenticate (None: they do not, and only loopback is served)."""
    insecure: bool = False
    """Serve a non-loopback ``host`` without authentication all the same."""
    run_retention: float | None = DEFAULT_RUN_RETENTION
    """Seconds a finished run's record stays in memory (see ``create_app``); None: for ever."""
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    """Seconds an idle thread keeps its state and values in memory (see ``create_app``)."""
    stream_log_bytes: int = DEFAULT_STREAM_LOG_BYTES
    """Bytes of SSE frames a resumable run keeps for rejoins (see ``create_app``)."""
    webhooks: bool = True
    """Whether runs may name a webhook (see :mod:`deepactors.server.webhooks`)."""
    webhook_allowed_hosts: tuple[str, ...] = ()
    """Hosts webhooks may call whatever they resolve to (this machine, a private network)."""
    store_ttl: float | None = None
    """Minutes a store item lives unless put with its own ``ttl``; None: for ever (see
    :class:`~deepactors.persistence.ttl.ExpiringStore`)."""
    thread_ttl: float | None = None
    """Minutes a thread lives after its last change unless made with its own ``ttl``;
    None: until deleted (see ``create_app``'s ``thread_ttl``)."""
    thread_ttl_strategy: TTLStrategy | None = None
    """What happens to it then (``delete``, ``keep_latest``); None: langgraph.json's
    strategy, else ``delete``."""

    @property
    def shared_runs(self) -> str | None:
        """The PostgreSQL DSN runs are shared through: ``--runs-db``, else a PostgreSQL ``--db``."""
        if self.runs_db is not None:
            return self.runs_db
        return self.db if self.db is not None and is_postgres(self.db) else None

    @property
    def served_hosts(self) -> tuple[str, ...]:
        """What the ``Host`` header may name: the loopback names and ``host`` at
        ``port``, and ``allowed_hosts`` (``*``: anything)."""
        if "*" in self.allowed_hosts:
            return ("*",)
        names = list(LOOPBACK_HOSTS)
        if not _is_wildcard(self.host):
            names.append(f"[{self.host}]" if ":" in self.host else self.host)
        served = [f"{name.lower()}:{self.port}" for name in names]
        return tuple(dict.fromkeys([*served, *self.allowed_hosts]))

    def app_limits(self) -> dict[str, Any]:
        """``create_app``'s browser checks, limits and retention, as these options set them."""
        return {
            "cors_origins": list(self.cors_origins),
            "allowed_hosts": list(self.served_hosts),
            "max_body": self.max_body,
            "body_timeout": self.body_timeout,
            "max_streams_per_client": self.max_streams_per_client,
            "max_runs_per_client": self.max_runs_per_client,
            "trusted_proxies": list(self.trusted_proxies),
            "run_retention": self.run_retention,
            "idle_timeout": self.idle_timeout,
            "stream_log_bytes": self.stream_log_bytes,
            "store_ttl": self.store_ttl,
            "thread_ttl": self.thread_ttl,
            "thread_ttl_strategy": self.thread_ttl_strategy,
            "webhooks": {"allowed_hosts": list(self.webhook_allowed_hosts)}
            if self.webhooks
            else None,
        }


GC_THRESHOLDS = (50_000, 20, 100)
"""Young-generation collections every 50,000 net allocations instead of 700, and
full collections 10x rarer than CPython's defaults (700, 10, 10)."""


def tune_gc() -> None:
    """Process-wide collector settings for a process that only serves (``deepactors serve``).

    A burst of runs allocates much and frees little until the runs end: with
    CPython's defaults the cyclic collector runs hundreds of times during such a
    burst and collects nothing, and its full passes walk everything alive. In
    W7 (1,000 runs started at once, in-process) that was a third of the CPU and
    pauses of 250-500 ms; after this, 12 collections, pauses under 80 ms, 25%
    less CPU. What is alive now (modules, the model SDK, the built agents) never
    becomes garbage, so it is frozen out of the collector's sight (``gc.freeze``).
    Process-wide, so only for processes that are servers and nothing else:
    ``create_app`` never does it.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database (else it is a SQLite file)."""
    return is_postgres_url(db)


def persistence_for(db: str) -> tuple[Checkpointer, Store]:
    """The checkpointer and store ``--db`` names: a SQLite file, or PostgreSQL.

    Raises:
        ConfigurationError: A PostgreSQL URL, and psycopg is not installed.
    """
    try:
        return open_checkpointer(db), open_store(db)
    except ImportError as exc:
        raise ConfigurationError(str(exc)) from exc


def load_auth(spec: str) -> Auth:
    """The :class:`Auth` that ``deepactors serve --auth SPEC`` names.

    Args:
        spec: ``keys-file:PATH`` (:func:`api_keys` from a file), ``keys-env:VAR``
            (from an environment variable), or ``module:attribute`` naming an
            :class:`Auth`, an authenticator function, or a function of no
            arguments returning an :class:`Auth` (where a JWT setup lives).

    Raises:
        ConfigurationError: The spec names nothing usable.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not kind or not rest:
        raise ConfigurationError(
            f"--auth takes keys-file:PATH, keys-env:VAR or module:attribute, not {spec!r}"
        )
    if kind == "keys-file":
        return api_keys(file=rest)
    if kind == "keys-env":
        return api_keys(env=rest)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like uvicorn: modules of the current folder
    try:
        found: Any = getattr(importlib.import_module(kind), rest)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"--auth {spec}: cannot import it ({exc})") from exc
    if isinstance(found, Auth):
        return found
    if inspect.iscoroutinefunction(found):
        return Auth(found)
    if callable(found):
        made = found()
        if isinstance(made, Auth):
            return made
    raise ConfigurationError(
        f"--auth {spec}: an Auth, an async authenticator, or a function returning an Auth"
    )


def build_app(
    target: str | None,
    db: str | None,
    runs_db: str | None = None,
    limits: Mapping[str, Any] | None = None,
    auth: str | None = None,
) -> Starlette:
    """The app ``serve`` runs: the agents, with threads and store in ``db`` when
    given, runs shared through ``runs_db`` (PostgreSQL) when given, and
    ``create_app``'s checks and ``limits`` (:meth:`ServeOptions.app_limits`),
    clients authenticated by ``auth`` (see :func:`load_auth`)."""
    limits = dict(limits or {})
    hooks = limits.pop("webhooks", {})
    if hooks is not None:
        # The secret from the environment only: a flag would show in `ps`.
        secret = os.environ.get(WEBHOOK_SECRET_ENV) or None
        hooks = Webhooks(secret=secret, **hooks)
    agents = load_agents(target)
    checkpointer, store = persistence_for(db) if db is not None else (None, MemoryStore())
    config = Path(CONFIG_FILE) if target is None else None  # langgraph.json's store
    if config is not None:
        store = indexed(store, config)
    # Outermost: expiry filters what an index finds too.
    store = expiring(store, config, limits.pop("store_ttl", None))
    expiry = thread_expiry(
        config, limits.pop("thread_ttl", None), limits.pop("thread_ttl_strategy", None)
    )
    if checkpointer is not None:  # --db is where threads are saved, whatever a module made
        agents = with_server_persistence(agents, checkpointer, store)
    # A process that only serves: collections deferred while runs are in
    # progress (process-wide, as tune_gc).
    return create_app(
        agents,
        checkpointer=checkpointer,
        store=store,
        runs_db=runs_db,
        defer_gc=True,
        auth=None if auth is None else load_auth(auth),
        webhooks=hooks,
        crons=open_cron_book(db),
        thread_ttl=expiry.seconds,
        thread_ttl_strategy=expiry.strategy,
        thread_ttl_sweep=expiry.sweep,
        **limits,
    )


def worker_app() -> Starlette:
    """The app of one worker process (``--workers``), from the environment."""
    limits = os.environ.get(_LIMITS_ENV)
    app = build_app(
        os.environ.get(_TARGET_ENV) or None,
        os.environ.get(_DB_ENV) or None,
        os.environ.get(_RUNS_DB_ENV) or None,
        json.loads(limits) if limits else None,
        os.environ.get(_AUTH_ENV) or None,
    )
    tune_gc()
    return app


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine (``localhost``, 127.x, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def _is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")


def check_exposure(options: ServeOptions) -> None:
    """Refuse to serve the network without authentication, unless told to; say so at
    start-up whenever clients are not authenticated (a WARNING, on stderr).

    Raises:
        ConfigurationError: A host other than loopback, no ``auth`` and not ``insecure``.
    """
    if options.auth is not None:
        return
    url = f"http://{options.host}:{options.port}"
    if is_loopback(options.host):
        _log.warning(
            "serving without authentication: any program on this machine can run the agents",
            url=url,
        )
        return
    if not options.insecure:
        raise ConfigurationError(
            f"--host {options.host} serves the network without authentication: anyone who "
            "can reach it could run the agents. Serve on 127.0.0.1 (the default), set up "
            "authentication, or pass --insecure to serve it unauthenticated all the same"
        )
    _log.warning(
        "serving the network without authentication (--insecure): anyone who can reach "
        "this server can run the agents",
        url=url,
    )


def serve(options: ServeOptions) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM shut it down cleanly).

    Raises:
        ConfigurationError: Bad options or agents.
    """
    if options.workers < 1:
        raise ConfigurationError("--workers must be at least 1")
    if not options.header_timeout > 0:
        raise ConfigurationError("--header-timeout must be more than 0 seconds")
    check_limits(options.max_body, options.body_timeout, options.max_streams_per_client)
    RunSlots(options.max_runs_per_client)  # a bad cap fails here, not in the app
    if options.log_level is not None:
        configure_logging(options.log_level, options.log_format)
    check_exposure(options)
    if options.workers > 1:
        _serve_workers(options)
        return
    app = build_app(
        options.target, options.db, options.shared_runs, options.app_limits(), options.auth
    )
    tune_gc()
    match asgi_server_for(options.loop):
        case "hypercorn":
            _serve_trio(app, options)
        case "uvicorn":
            uvicorn.run(
                app,
                host=options.host,
                port=options.port,
                timeout_graceful_shutdown=int(GRACEFUL_SECONDS),
                log_config=None,  # configured above: uvicorn's records go to the root handler
                log_level=options.log_level,
                **_uvicorn_limits(options),
            )


def _uvicorn_limits(options: ServeOptions) -> dict[str, Any]:
    """uvicorn's connection timeouts: its keep-alive timeout, which
    ``HeadTimeoutProtocol`` also holds every request's head to. Its proxy headers
    off: by default it believes ``X-Forwarded-For`` from 127.0.0.1, so any local
    program could pass for any address; the app believes them from
    ``--trusted-proxy`` only, on both servers alike."""
    return {
        "http": HeadTimeoutProtocol,
        "timeout_keep_alive": options.header_timeout,
        "backlog": BACKLOG,
        "proxy_headers": False,
    }


def _hypercorn_config(options: ServeOptions) -> HypercornConfig:
    """Hypercorn's config: its ``keep_alive_timeout`` already runs from a connection's
    opening (and each response's end) until a request's head is complete.
    ``read_timeout`` stays off: it times every read, also while a client waits,
    silent, on a stream for minutes; bodies have the app's ``body_timeout``."""
    config = HypercornConfig()
    config.bind = [f"{options.host}:{options.port}"]
    config.graceful_timeout = GRACEFUL_SECONDS
    config.keep_alive_timeout = options.header_timeout
    config.backlog = BACKLOG
    _hypercorn_logs(config, options)
    return config


def _serve_trio(app: Starlette, options: ServeOptions) -> None:
    # Imported here: an asyncio server (uvicorn) never needs hypercorn's trio side.
    from hypercorn.trio import serve as hypercorn_serve

    config = _hypercorn_config(options)
    print(f"deepactors: serving on http://{options.host}:{options.port} (hypercorn, trio)")

    async def main() -> None:
        # Ctrl-C or SIGTERM: a clean shutdown (runs cancelled and awaited), not a
        # KeyboardInterrupt thrown into whatever task was running.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

            async def shutdown_trigger() -> None:
                async for _ in signals:
                    return

            # Starlette's ASGI types and hypercorn's own describe one interface.
            framework = cast("ASGIFramework", app)
            await hypercorn_serve(framework, config, shutdown_trigger=shutdown_trigger)

    trio.run(main)


def _serve_workers(options: ServeOptions) -> None:
    """Several uvicorn processes on one socket. Each has its own runtime and thread
    actors; threads are shared through ``--db`` (whose lease keeps one run of a
    thread at a time across processes) and runs through PostgreSQL, so whichever
    process a request reaches can find, join, stream and cancel any run."""
    server = asgi_server_for(options.loop)
    if options.db is None:
        raise ConfigurationError("--workers > 1 needs --db: processes share threads through it")
    if options.shared_runs is None:
        raise ConfigurationError(
            "--workers > 1 shares runs through PostgreSQL: give --db postgresql://... "
            "(or --runs-db postgresql://...)"
        )
    if options.auth is not None:
        load_auth(options.auth)  # a bad --auth fails here, not in every worker
    os.environ[_TARGET_ENV] = options.target or ""
    os.environ[_DB_ENV] = options.db
    os.environ[_RUNS_DB_ENV] = options.shared_runs
    os.environ[_LIMITS_ENV] = json.dumps(options.app_limits())
    os.environ[_AUTH_ENV] = options.auth or ""
    if server == "hypercorn":
        from ._supervise import supervise  # hypercorn's trio side, for trio servers only

        config = _hypercorn_config(options)
        config.workers = options.workers
        config.worker_class = "trio"
        # Each worker process (spawned) builds its app from the environment.
        config.application_path = "deepactors.server._serve:worker_app()"
        print(f"deepactors: serving on http://{options.host}:{options.port} (hypercorn, trio)")
        # Not hypercorn's own run(): it stops every worker when one dies.
        status = supervise(config)
        if status != 0:
            sys.exit(status)
        return
    uvicorn.run(
        "deepactors.server._serve:worker_app",
        factory=True,
        host=options.host,
        port=options.port,
        workers=options.workers,
        timeout_graceful_shutdown=int(GRACEFUL_SECONDS),
        # Each worker process applies it again (it starts with logging unconfigured).
        log_config=_worker_log_config(options),
        log_level=options.log_level,
        **_uvicorn_limits(options),
    )


def _worker_log_config(options: ServeOptions) -> dict[str, Any] | None:
    if options.log_level is None:
        return None
    return logging_config(options.log_level, options.log_format)


def _hypercorn_logs(config: HypercornConfig, options: ServeOptions) -> None:
    """Hypercorn's access and error lines through the root logger's handler.

    Given logger objects, hypercorn adds no handler of its own (it would print
    access lines on stdout in its own format); a worker process (``--workers``)
    configures logging again from ``logconfig_dict``.
    """
    if options.log_level is None:
        config.accesslog = "-"
        return
    config.accesslog = logging.getLogger("hypercorn.access")
    config.errorlog = logging.getLogger("hypercorn.error")
    config.logconfig_dict = logging_config(options.log_level, options.log_format)

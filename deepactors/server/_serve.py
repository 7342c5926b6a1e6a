"""``deepactors serve``: check what it is asked, build the app, and serve it.

``ServeOptions`` (``_serve_options``) says what is asked; here the agents, the
database, the store, authentication and the limits become one app
(``build_app``), a server on the network without authentication is refused
unless told (``check_exposure``), and the app is run in this process or in
worker processes (``_processes``), which build theirs from the environment
this process leaves them (``worker_app``).
"""

from __future__ import annotations

import gc
import importlib
import inspect
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from .._core.asgi import asgi_server_for
from .._core.logs import configure_logging, get_logger
from ..errors import ConfigurationError
from ..persistence import Checkpointer, MemoryStore, Store, open_checkpointer, open_store
from ._app import create_app
from ._langgraph_json import (
    CONFIG_FILE,
    expiring,
    indexed,
    load_agents,
    thread_expiry,
    with_server_persistence,
)
from ._options import AppSettings
from ._processes import run_app, run_workers
from ._serve_options import ServeOptions
from .auth import Auth, api_keys
from .crons import open_cron_book
from .webhooks import Webhooks

__all__ = ["ServeOptions", "load_agents", "load_auth", "serve", "tune_gc"]

_OPTIONS_ENV = "DEEPACTORS_SERVE_OPTIONS"
"""Where the serving process leaves its options for its workers (``--workers``)."""
_WORKER_APP = "deepactors.server._serve:worker_app"
"""What each worker process calls to build its app (``--workers``)."""

_log = get_logger("deepactors.server")

WEBHOOK_SECRET_ENV = "DEEPACTORS_WEBHOOK_SECRET"
"""The environment variable ``deepactors serve`` reads webhooks' signing secret from."""


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


def build_app(options: ServeOptions) -> Starlette:
    """The app ``serve`` runs: the agents ``options`` name, with threads and store
    in its ``db`` when given, runs shared through PostgreSQL when asked
    (:attr:`ServeOptions.shared_runs`), clients authenticated by its ``auth`` (see
    :func:`load_auth`), and ``create_app``'s options as it sets them
    (:meth:`ServeOptions.app_options`)."""
    hooks = None
    if options.webhooks:
        # The secret from the environment only: a flag would show in `ps`.
        secret = os.environ.get(WEBHOOK_SECRET_ENV) or None
        hooks = Webhooks(secret=secret, allowed_hosts=list(options.webhook_allowed_hosts))
    agents = load_agents(options.target)
    db = options.db
    checkpointer, store = persistence_for(db) if db is not None else (None, MemoryStore())
    config = Path(CONFIG_FILE) if options.target is None else None  # langgraph.json's store
    if config is not None:
        store = indexed(store, config)
    # Outermost: expiry filters what an index finds too.
    store = expiring(store, config, options.store_ttl)
    expiry = thread_expiry(config, options.thread_ttl, options.thread_ttl_strategy)
    if checkpointer is not None:  # --db is where threads are saved, whatever a module made
        agents = with_server_persistence(agents, checkpointer, store)
    app_options = options.app_options()
    app_options["thread_ttl"] = expiry.seconds
    app_options["thread_ttl_strategy"] = expiry.strategy
    app_options["thread_ttl_sweep"] = expiry.sweep
    return create_app(
        agents,
        checkpointer=checkpointer,
        store=store,
        runs_db=options.shared_runs,
        auth=None if options.auth is None else load_auth(options.auth),
        webhooks=hooks,
        crons=open_cron_book(db),
        **app_options,
    )


def worker_app() -> Starlette:
    """The app of one worker process (``--workers``), from the options the
    serving process left in the environment."""
    app = build_app(ServeOptions.from_json(os.environ[_OPTIONS_ENV]))
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
    AppSettings.parse(options.app_options())  # a bad option fails here, not in the app
    if options.log_level is not None:
        configure_logging(options.log_level, options.log_format)
    check_exposure(options)
    if options.workers > 1:
        _serve_workers(options)
        return
    app = build_app(options)
    tune_gc()
    run_app(app, options)


def _serve_workers(options: ServeOptions) -> None:
    """Several processes on one socket. Each has its own runtime and thread
    actors; threads are shared through ``--db`` (whose lease keeps one run of a
    thread at a time across processes) and runs through PostgreSQL, so whichever
    process a request reaches can find, join, stream and cancel any run."""
    asgi_server_for(options.loop)  # a bad --loop is the first thing said
    if options.db is None:
        raise ConfigurationError("--workers > 1 needs --db: processes share threads through it")
    if options.shared_runs is None:
        raise ConfigurationError(
            "--workers > 1 shares runs through PostgreSQL: give --db postgresql://... "
            "(or --runs-db postgresql://...)"
        )
    if options.auth is not None:
        load_auth(options.auth)  # a bad --auth fails here, not in every worker
    os.environ[_OPTIONS_ENV] = options.to_json()
    run_workers(options, _WORKER_APP)

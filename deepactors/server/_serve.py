"""``deepactors serve``: run the app under uvicorn (asyncio) or hypercorn (trio)."""

from __future__ import annotations

import gc
import importlib
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio
import uvicorn
from hypercorn.config import Config as HypercornConfig
from hypercorn.run import run as hypercorn_run
from hypercorn.trio import serve as hypercorn_serve
from starlette.applications import Starlette

from .._core.logs import configure_logging, logging_config
from ..agent import DeepAgent
from ..demo import build_demo_agent
from ..errors import ConfigurationError
from ..persistence import Checkpointer, Store, is_postgres_url, open_checkpointer, open_store
from ._app import create_app

__all__ = ["ServeOptions", "load_agents", "serve", "tune_gc"]

_TARGET_ENV = "DEEPACTORS_SERVE_TARGET"
_DB_ENV = "DEEPACTORS_SERVE_DB"
_RUNS_DB_ENV = "DEEPACTORS_SERVE_RUNS_DB"
GRACEFUL_SECONDS = 3.0
"""How long open streams may run on at shutdown before their runs are cancelled."""


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

    @property
    def shared_runs(self) -> str | None:
        """The PostgreSQL DSN runs are shared through: ``--runs-db``, else a PostgreSQL ``--db``."""
        if self.runs_db is not None:
            return self.runs_db
        return self.db if self.db is not None and is_postgres(self.db) else None


def load_agents(target: str | None) -> dict[str, DeepAgent]:
    """The agents named by ``module:attribute`` (None: the offline demo agent).

    The attribute may be a ``DeepAgent``, a dict of them by assistant id, or a
    function of no arguments returning either. A lone agent is served as
    ``agent`` (the assistant id Agent Chat UI asks for by default).

    Raises:
        ConfigurationError: The target cannot be imported or is not agents.
    """
    if target is None:
        return {"agent": build_demo_agent()}
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"give the agent as module:attribute, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like uvicorn: modules of the current folder
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(f"module {module_name!r} has no {attribute!r}") from None
    if callable(value) and not isinstance(value, DeepAgent):
        value = value()
    if isinstance(value, DeepAgent):
        return {"agent": value}
    if (
        isinstance(value, Mapping)
        and value
        and all(isinstance(v, DeepAgent) for v in value.values())
    ):
        return dict(value)
    raise ConfigurationError(f"{target} is not a DeepAgent or a dict of them: {value!r}")


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


def build_app(target: str | None, db: str | None, runs_db: str | None = None) -> Starlette:
    """The app ``serve`` runs: the agents, with threads and store in ``db`` when
    given, and runs shared through ``runs_db`` (PostgreSQL) when given."""
    agents = load_agents(target)
    checkpointer, store = persistence_for(db) if db is not None else (None, None)
    # A process that only serves: collections deferred while runs are in
    # progress (process-wide, as tune_gc).
    return create_app(
        agents, checkpointer=checkpointer, store=store, runs_db=runs_db, defer_gc=True
    )


def worker_app() -> Starlette:
    """The app of one worker process (``--workers``), from the environment."""
    app = build_app(
        os.environ.get(_TARGET_ENV) or None,
        os.environ.get(_DB_ENV) or None,
        os.environ.get(_RUNS_DB_ENV) or None,
    )
    tune_gc()
    return app


def serve(options: ServeOptions) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM shut it down cleanly).

    Raises:
        ConfigurationError: Bad options or agents.
    """
    if options.workers < 1:
        raise ConfigurationError("--workers must be at least 1")
    if options.log_level is not None:
        configure_logging(options.log_level, options.log_format)
    if options.workers > 1:
        _serve_workers(options)
        return
    app = build_app(options.target, options.db, options.shared_runs)
    tune_gc()
    if options.loop == "trio":
        _serve_trio(app, options)
    elif options.loop == "asyncio":
        uvicorn.run(
            app,
            host=options.host,
            port=options.port,
            timeout_graceful_shutdown=int(GRACEFUL_SECONDS),
            log_config=None,  # configured above: uvicorn's records go to the root handler
            log_level=options.log_level,
        )
    else:
        raise ConfigurationError(f"--loop must be asyncio or trio, not {options.loop!r}")


def _serve_trio(app: Starlette, options: ServeOptions) -> None:
    config = HypercornConfig()
    config.bind = [f"{options.host}:{options.port}"]
    config.graceful_timeout = GRACEFUL_SECONDS
    _hypercorn_logs(config, options)
    print(f"deepactors: serving on http://{options.host}:{options.port} (hypercorn, trio)")

    async def main() -> None:
        # Ctrl-C or SIGTERM: a clean shutdown (runs cancelled and awaited), not a
        # KeyboardInterrupt thrown into whatever task was running.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

            async def shutdown_trigger() -> None:
                async for _ in signals:
                    return

            await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)  # type: ignore[arg-type]

    trio.run(main)


def _serve_workers(options: ServeOptions) -> None:
    """Several uvicorn processes on one socket. Each has its own runtime and thread
    actors; threads are shared through ``--db`` (whose lease keeps one run of a
    thread at a time across processes) and runs through PostgreSQL, so whichever
    process a request reaches can find, join, stream and cancel any run."""
    if options.loop not in ("asyncio", "trio"):
        raise ConfigurationError(f"--loop must be asyncio or trio, not {options.loop!r}")
    if options.db is None:
        raise ConfigurationError("--workers > 1 needs --db: processes share threads through it")
    if options.shared_runs is None:
        raise ConfigurationError(
            "--workers > 1 shares runs through PostgreSQL: give --db postgresql://... "
            "(or --runs-db postgresql://...)"
        )
    os.environ[_TARGET_ENV] = options.target or ""
    os.environ[_DB_ENV] = options.db
    os.environ[_RUNS_DB_ENV] = options.shared_runs
    if options.loop == "trio":
        config = HypercornConfig()
        config.bind = [f"{options.host}:{options.port}"]
        config.graceful_timeout = GRACEFUL_SECONDS
        _hypercorn_logs(config, options)
        config.workers = options.workers
        config.worker_class = "trio"
        # Each worker process (spawned) builds its app from the environment.
        config.application_path = "deepactors.server._serve:worker_app()"
        print(f"deepactors: serving on http://{options.host}:{options.port} (hypercorn, trio)")
        hypercorn_run(config)
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

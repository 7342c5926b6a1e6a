"""How the served app runs: in this process, or in worker processes on one socket.

One process: uvicorn on asyncio, hypercorn on trio (``_core.asgi`` picks), until
Ctrl-C or SIGTERM shut it down cleanly. Several (``--workers``): uvicorn's own
workers, or hypercorn's trio workers under ``_supervise`` (which restarts one
that dies); each worker builds its app from an import path. Both servers get the
same limits (the head timeout, the backlog, no proxy headers of their own) and
log through the root logger's handler.
"""

from __future__ import annotations

import logging
import signal
import sys
from typing import TYPE_CHECKING, Any, cast

import uvicorn
from hypercorn.config import Config as HypercornConfig
from starlette.applications import Starlette

from .._core.asgi import asgi_server_for
from .._core.logs import logging_config
from ._serve_options import ServeOptions
from ._uvicorn_http import HeadTimeoutProtocol

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework

__all__ = ["BACKLOG", "GRACEFUL_SECONDS", "run_app", "run_workers"]

GRACEFUL_SECONDS = 3.0
"""How long open streams may run on at shutdown before their runs are cancelled."""
BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (uvicorn's default;
hypercorn's is 100)."""


def run_app(app: Starlette, options: ServeOptions) -> None:
    """Serve ``app`` in this process until interrupted, on ``options.loop``'s server."""
    match asgi_server_for(options.loop):
        case "hypercorn":
            _serve_trio(app, options)
        case "uvicorn":
            uvicorn.run(
                app,
                host=options.host,
                port=options.port,
                timeout_graceful_shutdown=int(GRACEFUL_SECONDS),
                log_config=None,  # configured already: uvicorn's records go to the root handler
                log_level=options.log_level,
                **_uvicorn_limits(options),
            )


def run_workers(options: ServeOptions, factory: str) -> None:
    """Serve ``options.workers`` processes on one socket until interrupted.

    Args:
        options: What to serve on (the checks of ``serve`` passed).
        factory: ``module:function`` of no arguments that a worker process calls
            to build its app (from what the parent left in the environment).
    """
    if asgi_server_for(options.loop) == "hypercorn":
        from ._supervise import supervise  # hypercorn's trio side, for trio servers only

        config = _hypercorn_config(options)
        config.workers = options.workers
        config.worker_class = "trio"
        # Each worker process (spawned) builds its app from the environment.
        config.application_path = f"{factory}()"
        print(f"deepactors: serving on http://{options.host}:{options.port} (hypercorn, trio)")
        # Not hypercorn's own run(): it stops every worker when one dies.
        status = supervise(config)
        if status != 0:
            sys.exit(status)
        return
    uvicorn.run(
        factory,
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
    # Imported here: an asyncio server (uvicorn) never needs trio or hypercorn's trio side.
    import trio
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

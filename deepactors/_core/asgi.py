"""Which ASGI server serves an app on which event loop: the one place that decides.

uvicorn runs asyncio (on uvloop when it is installed); hypercorn runs trio.
``deepactors serve`` (one process or several) and an agent served over MCP's
streamable HTTP both ask :func:`asgi_server_for`, so a loop never gets a
server that cannot run it. :func:`serve_here` serves an app on the loop that
is running, for a caller inside one (the MCP server).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, cast

import anyio

from ..errors import ConfigurationError
from .loops import current_run

if TYPE_CHECKING:
    import uvicorn
    from hypercorn.typing import ASGIFramework
    from starlette.types import ASGIApp

__all__ = ["STOP_GRACE", "AsgiServer", "asgi_server_for", "serve_here"]

AsgiServer = Literal["uvicorn", "hypercorn"]

_SERVERS: dict[str, AsgiServer] = {"asyncio": "uvicorn", "trio": "hypercorn"}

STOP_GRACE = 1.0
"""Seconds a server cancelled by :func:`serve_here` gives open connections."""


def asgi_server_for(loop: str) -> AsgiServer:
    """The ASGI server deepactors runs on ``loop``.

    Raises:
        ConfigurationError: ``loop`` is not asyncio or trio.
    """
    try:
        return _SERVERS[loop]
    except KeyError:
        raise ConfigurationError(f"--loop must be asyncio or trio, not {loop!r}") from None


async def serve_here(app: ASGIApp, *, host: str, port: int) -> None:
    """Serve ``app`` on the running loop until cancelled (quietly: warnings only).

    Cancelled, the server stops as on Ctrl-C: it closes its sockets, and gives
    open connections :data:`STOP_GRACE` seconds to finish.
    """
    match asgi_server_for(current_run().library):
        case "hypercorn":
            from hypercorn.config import Config
            from hypercorn.trio import serve

            config = Config()
            config.bind = [f"{host}:{port}"]
            config.graceful_timeout = STOP_GRACE
            # Starlette's ASGI types and hypercorn's own describe one interface.
            await serve(cast("ASGIFramework", app), config)
        case "uvicorn":
            import uvicorn

            server = uvicorn.Server(
                uvicorn.Config(
                    app,
                    host=host,
                    port=port,
                    log_level="warning",
                    timeout_graceful_shutdown=math.ceil(STOP_GRACE),
                )
            )
            await _until_cancelled(server)


async def _until_cancelled(server: uvicorn.Server) -> None:
    """Run a uvicorn server until the caller is cancelled, then stop it cleanly.

    Cancelling ``server.serve()`` itself would leave its listening socket open:
    it runs shielded, and the cancellation asks it to exit instead.
    """

    async def serve() -> None:
        with anyio.CancelScope(shield=True):
            await server.serve()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            await anyio.sleep_forever()
        finally:
            server.should_exit = True

"""A small MCP server for the tests, written with the mcp SDK (its MCPServer, FastMCP's successor).

Run as ``python mcp_app.py stdio`` or ``python mcp_app.py http PORT`` (``http-json
PORT``: answers as plain JSON, not event streams). It covers what the registry
servers do not: a tool that hangs until cancelled (and writes down that it was),
one that blocks the server outright, one that kills it, one with an answer of
any size, the sessions it holds open over HTTP, and its own pid for counting
processes. ``MCP_APP_LOG`` names a file where it appends one line per event
(``start <pid>``, ``list``, ``hang <tag>``, ``cancelled <tag>``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("deepactors-test-app")


def _log(line: str) -> None:
    path = os.environ.get("MCP_APP_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@app.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@app.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers (structured output)."""
    return {"sum": a + b}


@app.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


_active = 0
_peak = 0


@app.tool()
async def busy() -> str:
    """Work a little; answer with the pid and the most calls this server ran at once."""
    global _active, _peak
    _active += 1
    _peak = max(_peak, _active)
    try:
        await anyio.sleep(0.02)
    finally:
        _active -= 1
    return f"{os.getpid()} {_peak}"


@app.tool()
async def hang(tag: str) -> str:
    """Wait until cancelled; note the start and the cancellation in the log."""
    _log(f"hang {tag}")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _log(f"cancelled {tag}")
        raise
    return "never"


@app.tool()
async def block(seconds: float) -> str:
    """Block the whole server (its event loop too): it reads nothing meanwhile."""
    _log("block")
    time.sleep(seconds)  # noqa: ASYNC251 - the point: a server stuck in a call
    return "unblocked"


@app.tool()
def big(megabytes: float) -> str:
    """An answer of this many megabytes (of 'x')."""
    return "x" * int(megabytes * 1_000_000)


@app.tool()
def sessions() -> int:
    """The sessions this server holds open over HTTP (0 over stdio)."""
    try:
        manager = app.session_manager
    except RuntimeError:  # not serving HTTP
        return 0
    return len(manager._server_instances)


@app.tool()
def fail(reason: str) -> str:
    """Raise an error (an isError result carrying the reason)."""
    raise ToolError(reason)


@app.tool()
def crash() -> str:
    """End the server process at once, saying why on stderr."""
    print("crash: the test asked for it", file=sys.stderr, flush=True)
    os._exit(3)


_list_tools = app.list_tools


async def _counted_list_tools() -> Any:
    _log("list")
    return await _list_tools()


app.list_tools = _counted_list_tools  # type: ignore[method-assign]


def main() -> None:
    _log(f"start {os.getpid()}")
    if sys.argv[1] == "stdio":
        anyio.run(app.run_stdio_async)
    else:
        port = int(sys.argv[2])
        json_response = sys.argv[1] == "http-json"
        anyio.run(
            lambda: app.run_streamable_http_async(
                host="127.0.0.1", port=port, json_response=json_response
            )
        )


if __name__ == "__main__":
    main()

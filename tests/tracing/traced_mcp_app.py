"""An MCP server over streamable HTTP that writes down the trace context it is sent.

Run as ``python traced_mcp_app.py PORT LOG``: the mcp SDK's MCPServer under
uvicorn, behind an ASGI middleware that appends one line per HTTP request to
LOG: its ``traceparent`` header (``-`` without one) and the JSON-RPC method of
its body (``tools/call``, ``initialize``...). Its tool ``echo`` says its text back.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

app = MCPServer("deepactors-traced-app")


@app.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


def _note(path: str, line: str) -> None:
    # A test server's log: a short blocking write is fine here.
    with open(path, "a") as f:
        f.write(line + "\n")


class HeaderLog:
    """ASGI middleware: a line per request, its traceparent and JSON-RPC method."""

    def __init__(self, inner: Any, path: str) -> None:
        self.inner = inner
        self.path = path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        headers = dict(scope["headers"])
        parent = headers.get(b"traceparent", b"-").decode("latin-1")
        body = bytearray()

        async def reading() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    try:
                        method = json.loads(body).get("method", "-")
                    except ValueError:
                        method = "-"
                    _note(self.path, f"{parent} {scope['method']} {method}")
            return message

        if scope["method"] != "POST":
            _note(self.path, f"{parent} {scope['method']} -")
            await self.inner(scope, receive, send)
            return
        await self.inner(scope, reading, send)


def main() -> None:
    port, log = int(sys.argv[1]), sys.argv[2]
    starlette = app.streamable_http_app()
    config = uvicorn.Config(HeaderLog(starlette, log), host="127.0.0.1", port=port, lifespan="on")
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()

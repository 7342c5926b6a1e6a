"""A stdio MCP server with one tool, ``echo``, for ``bench/w10_mcp.py`` (the mcp SDK's MCPServer,
FastMCP's successor in mcp 2.x)."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

app = MCPServer("deepactors-bench-echo")


@app.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


if __name__ == "__main__":
    anyio.run(app.run_stdio_async)

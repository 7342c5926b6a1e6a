"""MCP (Model Context Protocol): tools from MCP servers, and a deep agent served as one.

Optional: needs the ``mcp`` extra (``pip install 'deepactors[mcp]'``). Nothing
here imports the ``mcp`` SDK until a server is connected to or an agent served.

* :class:`MCPServer`: a stdio or streamable-HTTP server whose tools agents call
  (``create_deep_agent(mcp_servers={...})``), one session per runtime shared by
  the whole tree; :func:`set_max_idle_sessions` bounds the idle ones a runtime keeps.
* :func:`serve_mcp`: an agent as an MCP server (stdio or streamable HTTP).
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._config import DEFAULT_MAX_ANSWER_BYTES as DEFAULT_MAX_ANSWER_BYTES
from ._config import MCPServer as MCPServer
from ._config import mcp_servers_from as mcp_servers_from
from ._middleware import MCPToolsMiddleware as MCPToolsMiddleware
from ._pool import MAX_IDLE_SESSIONS as MAX_IDLE_SESSIONS
from ._pool import set_max_idle_sessions as set_max_idle_sessions
from ._serve import mcp_app as mcp_app
from ._serve import serve_mcp as serve_mcp
from ._sources import tool_sources as tool_sources
from ._tools import MCPTool as MCPTool

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "MAX_IDLE_SESSIONS",
    "MCPServer",
    "MCPTool",
    "MCPToolsMiddleware",
    "mcp_app",
    "mcp_servers_from",
    "serve_mcp",
    "set_max_idle_sessions",
    "tool_sources",
]

_publish(__all__, __name__, globals())

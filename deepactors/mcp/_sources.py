"""MCP servers given among an agent's tools, or by name in ``mcp_servers``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ConfigurationError
from ..hooks import AgentMiddleware
from ..tools import Tool, ToolLike, as_tools
from ._config import MCPServer, mcp_servers_from

__all__ = ["tool_sources"]


def tool_sources(
    items: Sequence[object] | None, mcp_servers: Mapping[str, object] | None
) -> tuple[list[Tool], list[AgentMiddleware]]:
    """The tools of a ``tools=`` list, and the middleware giving the MCP servers' tools.

    The servers are those in ``items`` and in ``mcp_servers`` (see
    :func:`mcp_servers_from`).

    Raises:
        ConfigurationError: An item that is neither a tool nor an MCP server, or
            a bad ``mcp_servers`` entry.
    """
    from ._middleware import MCPToolsMiddleware

    plain: list[ToolLike] = []
    servers: list[MCPServer] = []
    for item in items or ():
        if isinstance(item, MCPServer):
            servers.append(item)
        elif isinstance(item, Tool) or callable(item):
            plain.append(item)
        else:
            raise ConfigurationError(
                f"not a tool: {item!r} (pass a function, a Tool or an MCPServer)"
            )
    servers.extend(mcp_servers_from(mcp_servers or {}))
    return as_tools(plain), [MCPToolsMiddleware(servers)] if servers else []

"""``deepactors mcp [module:agent]``: serve an agent as an MCP server (stdio, or --http)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from .._core.logs import LOG_FORMATS, LOG_LEVELS, configure_logging

__all__ = ["add_mcp_command"]


def add_mcp_command(sub: Any) -> None:
    """Add the ``mcp`` subcommand to the ``deepactors`` parser's subparsers."""
    mcp = sub.add_parser(
        "mcp",
        help="serve an agent as an MCP server (Claude Desktop, Claude Code, any MCP client)",
    )
    mcp.add_argument(
        "agent",
        nargs="?",
        help="module:attribute of a DeepAgent (default: the offline demo agent)",
    )
    mcp.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    mcp.add_argument("--host", default="127.0.0.1", help="interface to listen on (--http)")
    mcp.add_argument("--port", type=int, default=8000, help="port to listen on (--http)")
    mcp.add_argument("--tool-name", default="run", help="the name of the tool that runs the agent")
    mcp.add_argument(
        "--loop",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="the event loop to run on (default: asyncio)",
    )
    mcp.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="warning",
        help="the least severe log records shown, on stderr: stdout carries the protocol "
        "over stdio (default: warning)",
    )
    mcp.add_argument("--log-format", choices=LOG_FORMATS, default="console")
    mcp.set_defaults(func=_serve_mcp)


def _serve_mcp(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError
    from ..mcp import serve_mcp
    from ..server import load_agents

    configure_logging(args.log_level, args.log_format)
    try:
        agents = load_agents(args.agent)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(agents) != 1:
        print(
            f"error: {args.agent} names {len(agents)} agents; serve one (module:attribute of "
            "a DeepAgent)",
            file=sys.stderr,
        )
        return 2
    (agent,) = agents.values()

    async def main() -> None:
        await serve_mcp(
            agent,
            transport="http" if args.http else "stdio",
            host=args.host,
            port=args.port,
            tool_name=args.tool_name,
        )

    try:
        anyio.run(main, backend=args.loop)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def read_mcp_servers(path: str) -> dict[str, Any]:
    """``deepactors run --mcp FILE``: the servers of a JSON file in the ``mcpServers`` shape.

    Raises:
        ConfigurationError: The file cannot be read or is not a JSON object.
    """
    import json

    from ..errors import ConfigurationError

    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"--mcp {path}: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"--mcp {path}: expected a JSON object of servers")
    return value

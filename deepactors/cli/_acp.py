"""``deepactors acp module:agent``: an agent as an ACP agent over stdio (editors)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import Any

import anyio

from .._core.logs import LOG_FORMATS, LOG_LEVELS, configure_logging

__all__ = ["add_acp_command"]


def add_acp_command(sub: Any) -> None:
    """Add the ``acp`` subcommand to the ``deepactors`` parser's subparsers."""
    acp = sub.add_parser(
        "acp",
        help="serve an agent to a code editor over the Agent Client Protocol (stdio)",
    )
    acp.add_argument(
        "agent",
        nargs="?",
        help="module:attribute of a DeepAgent (default: the offline demo agent)",
    )
    acp.add_argument(
        "--db",
        help="a SQLite file (or postgresql:// URL) where sessions are saved, to load them "
        "again later (default: the agent's checkpointer, else in memory)",
    )
    acp.add_argument(
        "--loop",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="the event loop to run on (default: asyncio)",
    )
    acp.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="warning",
        help="the least severe log records shown, on stderr: stdout carries the protocol "
        "(default: warning)",
    )
    acp.add_argument("--log-format", choices=LOG_FORMATS, default="console")
    acp.set_defaults(func=_serve_acp)


def _serve_acp(args: argparse.Namespace) -> int:
    from ..acp import serve_acp
    from ..agent import DeepAgent
    from ..errors import ConfigurationError
    from ..persistence import open_checkpointer
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
    if args.db is not None:
        try:
            saver = open_checkpointer(args.db)
        except ImportError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        agent = DeepAgent(dataclasses.replace(agent.spec, checkpointer=saver))
    with contextlib.suppress(KeyboardInterrupt):  # the editor stopped it: a clean exit
        anyio.run(serve_acp, agent, backend=args.loop)
    return 0

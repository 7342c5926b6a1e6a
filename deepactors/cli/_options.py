"""Options more than one ``deepactors`` command takes: the event loop, the log records.

``demo``, ``run`` and ``serve`` add them through these two functions, so the flags
read the same on each (``acp`` and ``mcp`` word their log help for stdio themselves).
"""

from __future__ import annotations

import argparse

from .._core.logs import LOG_FORMATS, LOG_LEVELS

__all__ = ["LOOP_HELP", "log_options", "loop_option"]

LOOP_HELP = "the event loop to run on (default: asyncio)"


def loop_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Add ``--loop`` (asyncio or trio; asyncio by default) to ``parser``."""
    parser.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio", help=help_text)


def log_options(parser: argparse.ArgumentParser, level: str) -> None:
    """Add ``--log-level`` (``level`` by default) and ``--log-format`` to ``parser``."""
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=level,
        help=f"the least severe log records shown, on stderr (default: {level})",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="console",
        help="console lines, or one JSON object per line (default: console)",
    )

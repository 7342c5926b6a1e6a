"""The ``deepactors`` command: ``deepactors demo`` runs the offline demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import anyio

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from .demo import DEMO_QUESTION, run_demo

    question = " ".join(args.question) or DEMO_QUESTION
    print(f"deepactors demo on {args.loop} (offline, deterministic model)")
    print(f"question: {question}\n")
    result = anyio.run(lambda: run_demo(question), backend=args.loop)
    todos = result["todos"]
    done = sum(t.status == "completed" for t in todos)
    files = result["files"]
    print(f"\n{len(result['messages'])} messages, plan {done}/{len(todos)} done")
    print(f"files: {', '.join(sorted(files))}")
    if "/report.md" in files:
        print(f"\n/report.md:\n{files['/report.md'].content}", end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="deepactors", description="Deep agents on an async actor runtime."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline demo on a deterministic model")
    demo.add_argument("question", nargs="*", help="the question (default: a built-in one)")
    demo.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deepactors`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

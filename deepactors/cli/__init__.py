"""The ``deepactors`` command.

``deepactors demo`` runs the offline demo; ``deepactors run "question"`` runs the
deep agent (on Claude by default, ``ANTHROPIC_API_KEY``; ``--model provider:model``
for any other) with the live event view, and prints its usage and cost at the end;
``deepactors serve [module:agent]`` serves an agent over HTTP (LangGraph's protocol);
``deepactors mcp [module:agent]`` serves one as an MCP server (stdio, or ``--http``);
``deepactors acp [module:agent]`` serves one to a code editor (Agent Client Protocol, stdio).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from .._core.logs import configure_logging
from ._acp import add_acp_command
from ._mcp import add_mcp_command, read_mcp_servers
from ._options import LOOP_HELP, log_options, loop_option
from ._serve import add_serve_command

if TYPE_CHECKING:
    from ..agent import DeepAgent
    from ..backends import BubblewrapSandbox
    from ..messages import Usage

__all__ = ["build_parser", "main", "usage_line"]


def _version() -> str:
    try:
        return importlib.metadata.version("deepactors")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _demo(args: argparse.Namespace) -> int:
    from ..assembly.demo import DEMO_QUESTION, run_demo
    from ._live import open_view

    configure_logging(args.log_level, args.log_format)
    question = " ".join(args.question) or DEMO_QUESTION
    print(f"deepactors demo on {args.loop} (offline, deterministic model)")
    print(f"question: {question}\n")
    with open_view() as view:
        result = anyio.run(lambda: run_demo(question, on_event=view.feed), backend=args.loop)
    todos = result["todos"]
    done = sum(t.status == "completed" for t in todos)
    files = result["files"]
    print(f"\n{len(result['messages'])} messages, plan {done}/{len(todos)} done")
    print(f"files: {', '.join(sorted(files))}")
    if "/report.md" in files:
        print(f"\n/report.md:\n{files['/report.md'].content}", end="")
    return 0


# The key each built-in provider's SDK reads, checked before anything starts.
_PROVIDER_KEYS = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
}


def _missing_key(model: str | None) -> str | None:
    """The one line ``run`` prints when ``model``'s provider needs a key not set."""
    import os

    provider = (model or "anthropic:").partition(":")[0]
    var = _PROVIDER_KEYS.get(provider)
    if var is None or os.environ.get(var):
        return None
    if provider == "anthropic":
        return (
            "deepactors run on Claude needs ANTHROPIC_API_KEY; or choose another model with "
            "--model (openai:gpt-5.5, ollama:llama3.3, ...). To see the runtime without a key, "
            "run `deepactors demo`."
        )
    return (
        f"deepactors run on {model} needs {var} (and OPENAI_BASE_URL for another "
        "OpenAI-compatible server); or choose another model with --model. To see the "
        "runtime without a key, run `deepactors demo`."
    )


def _run_agent(args: argparse.Namespace) -> tuple[DeepAgent, BubblewrapSandbox | None]:
    """The agent ``run`` runs (``--agent module:attribute``, or one built from the
    options), and the sandbox it works in, when ``--sandbox`` made one.

    Raises:
        ConfigurationError: A bad option or agent (printed as one line, exit 2).
    """
    from pathlib import Path

    from ..agent import DeepAgent, load_target
    from ..assembly import create_deep_agent
    from ..errors import ConfigurationError

    checkpointer = None
    if args.db:
        from ..persistence import open_checkpointer

        try:
            checkpointer = open_checkpointer(args.db)  # a file, or a postgresql:// URL
        except ImportError as exc:
            raise ConfigurationError(f"--db {args.db}: {exc}") from None
        except ConfigurationError as exc:
            raise ConfigurationError(f"--db {args.db}: {exc}") from None
    if args.agent:
        given = [f"--{o}" for o in ("model", "mcp", "sandbox") if getattr(args, o)]
        if args.ray is not None:  # a placement is an argument of the agent built here
            given.append("--ray")
        if given:
            raise ConfigurationError(
                f"{', '.join(given)} with --agent: the agent brings its own; give one or the other"
            )
        agent = load_target(args.agent, Path.cwd())
        if not isinstance(agent, DeepAgent):
            raise ConfigurationError(f"--agent {args.agent} is not a DeepAgent: {agent!r}")
        if checkpointer is not None:  # --db is where the thread is kept, as for serve
            agent = type(agent)(dataclasses.replace(agent.spec, checkpointer=checkpointer))
        return agent, None
    sandbox = None
    if args.sandbox:
        from ..backends import BubblewrapSandbox

        # The model's commands and files in a workspace under this folder,
        # isolated from the host (Linux namespaces; no network).
        sandbox = BubblewrapSandbox(args.sandbox)
    placement = None
    if args.ray is not None:
        from ..placement import RayPlacement

        # The subagents on Ray workers: a local Ray on this machine's cores, or
        # the cluster named (started with `ray start`, or ray://host:10001).
        placement = RayPlacement(address=args.ray or None)
    servers = read_mcp_servers(args.mcp) if args.mcp else None
    agent = create_deep_agent(
        args.model or None,
        checkpointer=checkpointer,
        mcp_servers=servers,
        backend=sandbox,
        placement=placement,
    )
    return agent, sandbox


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError, DeepActorsError
    from ..events import RunFinished
    from ._live import View, open_view

    configure_logging(args.log_level, args.log_format)
    if args.thread and not args.db:
        print(
            "error: --thread needs --db: without a database nothing keeps the thread "
            "between runs of the command",
            file=sys.stderr,
        )
        return 2
    missing = None if args.agent else _missing_key(args.model)
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    try:
        agent, sandbox = _run_agent(args)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    thread = args.thread or ("cli" if agent.spec.checkpointer is not None else None)
    question = " ".join(args.question)

    spent: list[Usage | None] = [None]

    async def main(view: View) -> None:
        async with contextlib.AsyncExitStack() as stack:
            if sandbox is not None:
                await stack.enter_async_context(sandbox)  # SandboxUnavailable: said below
            stack.push_async_callback(_close_models, agent)
            async with agent.astream(question, thread_id=thread, timeout=args.timeout) as events:
                async for event in events:
                    view.feed(event)
                    if isinstance(event, RunFinished) and "/" not in event.path:
                        spent[0] = event.usage  # the top run's: the whole tree's

    try:
        with open_view() as view:
            anyio.run(main, view, backend=args.loop)
    except (DeepActorsError, TimeoutError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        print(usage_line(spent[0]))
    return 0


async def _close_models(agent: DeepAgent) -> None:
    from ..middleware import aclose_tree_models

    await aclose_tree_models(agent.spec)


def usage_line(usage: Usage | None) -> str:
    """What ``deepactors run`` prints at the end: the tree's tokens, calls and cost."""
    if usage is None:
        return "usage: not reported by the model"
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    tokens = f"{usage.input_tokens + cached:,} input"
    if cached:
        tokens += f" ({usage.cache_read_tokens:,} cache read, {usage.cache_write_tokens:,} written)"
    calls = "call" if usage.requests == 1 else "calls"
    cost = "unknown (no prices)" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return (
        f"usage: {tokens}, {usage.output_tokens:,} output tokens in {usage.requests} model "
        f"{calls}; cost {cost}"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="deepactors", description="Deep agents on an async actor runtime."
    )
    parser.add_argument("--version", action="version", version=f"deepactors {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_run(sub)
    add_serve_command(sub)
    add_mcp_command(sub)
    add_acp_command(sub)
    return parser


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``deepactors demo``: the offline demo."""
    demo = sub.add_parser("demo", help="run the offline demo on a deterministic model")
    demo.add_argument(
        "question",
        nargs="*",
        help="the question; the demo researches the library topics it names (actors, "
        "structured concurrency, cancellation), all of them if it names none",
    )
    loop_option(demo, LOOP_HELP)
    log_options(demo, "warning")
    demo.set_defaults(func=_demo)


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``deepactors run``: the deep agent with the live view."""
    run = sub.add_parser("run", help="run the deep agent with a live event view")
    run.add_argument("question", nargs="+", help="what to ask")
    run.add_argument(
        "--model",
        help="provider:model, e.g. anthropic:claude-sonnet-5-5 (the default), openai:gpt-5.5, "
        "openai-responses:gpt-5.5, ollama:llama3.3, vllm:<model>, openrouter:<vendor/model>",
    )
    run.add_argument(
        "--agent",
        metavar="TARGET",
        help="run your agent instead: module:attribute or file.py:attribute of a DeepAgent "
        "(or a function of no arguments returning one), as `deepactors serve` takes it",
    )
    run.add_argument("--thread", help="thread id to continue (with --db)")
    run.add_argument("--db", help="SQLite file or postgresql:// URL that keeps threads across runs")
    run.add_argument("--timeout", type=float, default=None, help="seconds for the whole run")
    run.add_argument(
        "--mcp",
        metavar="FILE",
        help="MCP servers whose tools the agent gets: a JSON file in Claude Desktop's "
        "mcpServers shape (needs deepactors[mcp])",
    )
    run.add_argument(
        "--sandbox",
        metavar="DIR",
        help="run the agent's files and shell commands in a bubblewrap sandbox whose "
        "workspace lives under DIR (Linux, Debian's bubblewrap; no network)",
    )
    run.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the subagents on Ray workers: a local Ray on this machine's cores, or the "
        "cluster at ADDRESS ('auto' for one `ray start` runs here, ray://host:10001) "
        "(needs deepactors[ray])",
    )
    loop_option(run, LOOP_HELP)
    log_options(run, "warning")
    run.set_defaults(func=_run)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deepactors`` command (no arguments: its help)."""
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The ``deepactors`` command.

``deepactors demo`` runs the offline demo; ``deepactors run "question"`` runs the
deep agent (on Claude by default, ``ANTHROPIC_API_KEY``; ``--model provider:model``
for any other) with the live event view, and prints its usage and cost at the end;
``deepactors serve [module:agent]`` serves an agent over HTTP (LangGraph's protocol);
``deepactors mcp [module:agent]`` serves one as an MCP server (stdio, or ``--http``).
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

from .._core.logs import LOG_FORMATS, LOG_LEVELS, configure_logging
from ._mcp import add_mcp_command, read_mcp_servers

if TYPE_CHECKING:
    from ..messages import Usage

__all__ = ["build_parser", "main", "usage_line"]

_LOOP_HELP = "the event loop to run on (default: asyncio)"


def _version() -> str:
    try:
        return importlib.metadata.version("deepactors")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _demo(args: argparse.Namespace) -> int:
    from ..demo import DEMO_QUESTION, run_demo
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


def _run(args: argparse.Namespace) -> int:
    import os

    from ..errors import ConfigurationError, DeepActorsError
    from ..events import RunFinished
    from ..factory import create_deep_agent
    from ..middleware import aclose_tree_models
    from ._live import View, open_view

    configure_logging(args.log_level, args.log_format)
    if args.thread and not args.db:
        print(
            "error: --thread needs --db: without a database nothing keeps the thread "
            "between runs of the command",
            file=sys.stderr,
        )
        return 2
    model = args.model or None
    if (model is None or str(model).startswith("anthropic:")) and not os.environ.get(
        "ANTHROPIC_API_KEY"
    ):
        print(
            "deepactors run on Claude needs ANTHROPIC_API_KEY; or choose another model with "
            "--model (openai:gpt-5.5, ollama:llama3.3, ...). To see the runtime without a key, "
            "run `deepactors demo`.",
            file=sys.stderr,
        )
        return 2
    checkpointer = None
    if args.db:
        from ..persistence import open_checkpointer

        try:
            checkpointer = open_checkpointer(args.db)  # a file, or a postgresql:// URL
        except (ImportError, ConfigurationError) as exc:
            print(f"error: --db {args.db}: {exc}", file=sys.stderr)
            return 2
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
    try:
        servers = read_mcp_servers(args.mcp) if args.mcp else None
        agent = create_deep_agent(
            model,
            checkpointer=checkpointer,
            mcp_servers=servers,
            backend=sandbox,
            placement=placement,
        )
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    thread = args.thread or ("cli" if checkpointer is not None else None)
    question = " ".join(args.question)

    spent: list[Usage | None] = [None]

    async def main(view: View) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                if sandbox is not None:
                    await stack.enter_async_context(sandbox)  # SandboxUnavailable: said below
                async with agent.astream(
                    question, thread_id=thread, timeout=args.timeout
                ) as events:
                    async for event in events:
                        view.feed(event)
                        if isinstance(event, RunFinished) and "/" not in event.path:
                            spent[0] = event.usage  # the top run's: the whole tree's
        finally:
            await aclose_tree_models(agent.spec)

    try:
        with open_view() as view:
            anyio.run(main, view, backend=args.loop)
    except (DeepActorsError, TimeoutError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        print(usage_line(spent[0]))
    return 0


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


def _serve(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError
    from ..server import ServeOptions, serve

    options = ServeOptions(
        target=args.agent,
        host=args.host,
        port=args.port,
        db=args.db,
        loop=args.loop,
        workers=args.workers,
        runs_db=args.runs_db,
        log_level=args.log_level,
        log_format=args.log_format,
        cors_origins=tuple(args.cors_origin),
        allowed_hosts=tuple(args.allowed_host),
        insecure=args.insecure,
        auth=args.auth,
        # Not given: ServeOptions' defaults (not imported to build the parser:
        # the server's modules would slow every command's start).
        **{name: getattr(args, name) for name in _LIMITS if getattr(args, name) is not None},
    )
    if options.max_streams_per_client == 0:
        options = dataclasses.replace(options, max_streams_per_client=None)
    if options.run_retention == float("inf"):
        options = dataclasses.replace(options, run_retention=None)
    try:
        serve(options)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="deepactors", description="Deep agents on an async actor runtime."
    )
    parser.add_argument("--version", action="version", version=f"deepactors {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline demo on a deterministic model")
    demo.add_argument(
        "question",
        nargs="*",
        help="the question; the demo researches the library topics it names (actors, "
        "structured concurrency, cancellation), all of them if it names none",
    )
    demo.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio", help=_LOOP_HELP)
    _log_options(demo, "warning")
    demo.set_defaults(func=_demo)
    run = sub.add_parser("run", help="run the deep agent with a live event view")
    run.add_argument("question", nargs="+", help="what to ask")
    run.add_argument(
        "--model",
        help="provider:model, e.g. anthropic:claude-sonnet-5-5 (the default), openai:gpt-5.5, "
        "openai-responses:gpt-5.5, ollama:llama3.3, vllm:<model>, openrouter:<vendor/model>",
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
    run.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio", help=_LOOP_HELP)
    _log_options(run, "warning")
    run.set_defaults(func=_run)
    serve = sub.add_parser(
        "serve",
        help="serve an agent on the LangGraph Agent Protocol (langgraph-sdk, Agent Chat UI)",
    )
    serve.add_argument(
        "agent",
        nargs="?",
        help="module:attribute or file.py:attribute of a DeepAgent (default: the graphs of "
        "./langgraph.json, else the offline demo agent)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    serve.add_argument("--port", type=int, default=2024, help="port to listen on")
    serve.add_argument(
        "--db",
        help="SQLite file or postgresql:// URL that keeps threads and the store "
        "(with PostgreSQL, runs are shared between processes too)",
    )
    serve.add_argument(
        "--loop",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="asyncio serves with uvicorn, trio with hypercorn",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes on one port (needs --db postgresql://...)",
    )
    serve.add_argument(
        "--runs-db",
        help="postgresql://... through which several server processes share runs "
        "(default: --db when it is PostgreSQL)",
    )
    _serve_safety_options(serve)
    _log_options(serve, "info")
    serve.set_defaults(func=_serve)
    add_mcp_command(sub)
    return parser


_LIMITS = (
    "max_body",
    "body_timeout",
    "header_timeout",
    "max_streams_per_client",
    "run_retention",
    "idle_timeout",
    "stream_log_bytes",
)


def _seconds_or_never(text: str) -> float:
    """A number of seconds, or ``never`` (infinity: kept for ever)."""
    if text.strip().lower() in ("never", "none", "forever"):
        return float("inf")
    value = float(text)
    if value < 0 or value != value:  # NaN
        raise argparse.ArgumentTypeError(f"{text!r}: seconds (0 or more), or 'never'")
    return value


def _serve_safety_options(serve: argparse.ArgumentParser) -> None:
    # The defaults in the help are ServeOptions' (tests/server/test_guard_cli.py
    # checks that they agree).
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="URL",
        help="an origin web pages may call from, e.g. http://localhost:3000 for Agent Chat "
        "UI (repeatable; '*' for any). Default: none, and a request from any other origin "
        "is refused",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name the Host header may give, NAME or NAME:PORT (repeatable; '*' for any). "
        "Always served: localhost, 127.0.0.1, [::1] and --host, at --port",
    )
    serve.add_argument(
        "--max-body",
        type=int,
        metavar="BYTES",
        help="largest request body (default: 4194304, 4 MiB)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        metavar="SECONDS",
        help="time to receive a request body (default: 30)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        metavar="SECONDS",
        help="time a connection has to send a request's headers, from its opening or its "
        "previous response; also the idle keep-alive time (default: 10)",
    )
    serve.add_argument(
        "--max-streams-per-client",
        type=int,
        metavar="N",
        help="streams, waits and joins one client address may have open at once "
        "(default: 100; 0: no cap)",
    )
    serve.add_argument(
        "--run-retention",
        type=_seconds_or_never,
        metavar="SECONDS",
        help="how long a finished run's values and input stay in memory for clients to "
        "read or join; then only its status is kept (default: 60; 'never' to keep them)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help="how long an idle thread keeps its actor and values in memory; then they "
        "are read back from the checkpointer when asked for (default: 300)",
    )
    serve.add_argument(
        "--stream-log-bytes",
        type=int,
        metavar="BYTES",
        help="bytes of events a resumable run keeps for clients that rejoin it with "
        "Last-Event-ID; past it the oldest are dropped and a client asking for them is "
        "told so (default: 67108864, 64 MiB)",
    )
    serve.add_argument(
        "--auth",
        metavar="SPEC",
        help="authenticate clients: keys-file:PATH (API keys, 'key user' lines or JSON), "
        "keys-env:VAR (key=user,...), or module:attribute naming an Auth "
        "(deepactors.server.auth, e.g. jwt_bearer); threads are then each user's own",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="serve a --host other than loopback without authentication (anyone who can "
        "reach it can run the agents)",
    )


def _log_options(parser: argparse.ArgumentParser, level: str) -> None:
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

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

from .._core.logs import LOG_FORMATS, LOG_LEVELS, configure_logging
from ._acp import add_acp_command
from ._mcp import add_mcp_command, read_mcp_servers

if TYPE_CHECKING:
    from ..agent import DeepAgent
    from ..backends import BubblewrapSandbox
    from ..messages import Usage

__all__ = ["build_parser", "main", "usage_line"]

_LOOP_HELP = "the event loop to run on (default: asyncio)"


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
        trusted_proxies=tuple(args.trusted_proxy),
        insecure=args.insecure,
        auth=args.auth,
        webhooks=not args.no_webhooks,
        webhook_allowed_hosts=tuple(args.webhook_allow_host),
        # Not given: ServeOptions' defaults (not imported to build the parser:
        # the server's modules would slow every command's start).
        **{name: getattr(args, name) for name in _LIMITS if getattr(args, name) is not None},
    )
    if options.max_streams_per_client == 0:
        options = dataclasses.replace(options, max_streams_per_client=None)
    if options.max_runs_per_client == 0:
        options = dataclasses.replace(options, max_runs_per_client=None)
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
    _add_demo(sub)
    _add_run(sub)
    _add_serve(sub)
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
    _loop_option(demo, _LOOP_HELP)
    _log_options(demo, "warning")
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
    _loop_option(run, _LOOP_HELP)
    _log_options(run, "warning")
    run.set_defaults(func=_run)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``deepactors serve``: an agent on the LangGraph Agent Protocol."""
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
    _loop_option(serve, "asyncio serves with uvicorn, trio with hypercorn")
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
    _serve_platform_options(serve)
    _log_options(serve, "info")
    serve.set_defaults(func=_serve)


def _loop_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio", help=help_text)


_LIMITS = (
    "max_body",
    "body_timeout",
    "header_timeout",
    "max_streams_per_client",
    "max_runs_per_client",
    "run_retention",
    "idle_timeout",
    "stream_log_bytes",
    "store_ttl",
    "thread_ttl",
    "thread_ttl_strategy",
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
    _serve_limit_options(serve)
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


def _serve_limit_options(serve: argparse.ArgumentParser) -> None:
    # Not given: ServeOptions' defaults, which the help names.
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
        help="streams, waits and joins one client (its identity with --auth, else its "
        "address) may have open at once (default: 100; 0: no cap)",
    )
    serve.add_argument(
        "--max-runs-per-client",
        type=int,
        metavar="N",
        help="runs one client (its identity with --auth, else its address) may have in "
        "flight at once, background runs included; past it 429 with Retry-After "
        "(default: 100; 0: no cap)",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="a reverse proxy (IP address or network, e.g. 10.0.0.0/8; '*' for any) whose "
        "X-Forwarded-For and X-Forwarded-Proto are believed, as uvicorn's "
        "--forwarded-allow-ips (repeatable). Default: none, from any peer",
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


def _serve_platform_options(serve: argparse.ArgumentParser) -> None:
    """What ``serve`` does besides answering: store items' time to live, webhooks."""
    serve.add_argument(
        "--store-ttl",
        type=float,
        metavar="MINUTES",
        help="minutes a store item lives since last written or read, unless put with its "
        "own ttl (default: for ever; langgraph.json's store.ttl also sets it)",
    )
    serve.add_argument(
        "--thread-ttl",
        type=float,
        metavar="MINUTES",
        help="minutes a thread lives after its last change (made, updated, a run ended), "
        "unless made with its own ttl; then it is deleted with its checkpoints, never "
        "during a run (default: until deleted; langgraph.json's checkpointer.ttl also "
        "sets it)",
    )
    serve.add_argument(
        "--thread-ttl-strategy",
        choices=("delete", "keep_latest"),
        help="what happens to a thread whose --thread-ttl has passed: delete it (the "
        "default), or keep_latest: drop its history and keep its latest state, once per change",
    )
    serve.add_argument(
        "--no-webhooks",
        action="store_true",
        help="refuse runs that name a webhook (422). By default a run's webhook is POSTed "
        "its outcome when it ends, signed with $DEEPACTORS_WEBHOOK_SECRET when set",
    )
    serve.add_argument(
        "--webhook-allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host webhooks may call though it is this machine or a private network, "
        "NAME or NAME:PORT (repeatable). Others must resolve to public addresses",
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

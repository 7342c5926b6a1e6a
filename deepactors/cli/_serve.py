"""``deepactors serve``: its options, and the ``ServeOptions`` they make.

The parser is built for every command, so nothing of the server is imported here
until ``serve`` runs: a limit not given on the command line is left out, and
``ServeOptions`` supplies its default (the help names it;
tests/server/test_serve_limits.py checks that the two agree).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ._options import log_options, loop_option

__all__ = ["add_serve_command"]


def add_serve_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``deepactors serve`` (an agent on the LangGraph Agent Protocol) to ``sub``."""
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
    loop_option(serve, "asyncio serves with uvicorn, trio with hypercorn")
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
    serve.add_argument(
        "--runs-db-patience",
        type=float,
        metavar="SECONDS",
        help="how long a run of another process is followed while the runs database is "
        "unreachable; then it ends here as an error that says so (default: 30)",
    )
    _serve_safety_options(serve)
    _serve_platform_options(serve)
    log_options(serve, "info")
    serve.set_defaults(func=_serve)


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


_LIMITS = (
    "max_body",
    "body_timeout",
    "header_timeout",
    "max_streams_per_client",
    "max_runs_per_client",
    "run_retention",
    "idle_timeout",
    "stream_log_bytes",
    "runs_db_patience",
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
    # The defaults in the help are ServeOptions' (tests/server/test_serve_limits.py
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

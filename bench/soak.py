"""Soak: does one server process give its memory back, run after run?

``--runs`` stateless runs (``POST /runs/wait``, no thread) and ``--threads``
threads (``POST /threads``, then a run on each, ``POST /threads/{id}/runs/wait``)
against one server process with a SQLite database (``--db``, as ``deepactors
serve --db file.sqlite`` keeps threads), through HTTP clients on 127.0.0.1. The
server is a real uvicorn (asyncio, on uvloop when installed) or hypercorn (trio)
subprocess with the app ``deepactors serve`` builds (``create_app`` with the
SQLite checkpointer and store, ``defer_gc``, ``tune_gc``). Each run's answer
is ``--size`` characters (``--thread-size`` for runs of threads): what a leak
would show.

    python bench/soak.py [--loop asyncio|trio] [--runs 20000] [--threads 2000]
        [--size 100000] [--thread-size 50000] [--clients 8]
        [--run-retention 1] [--idle-timeout 1] [--quick] [--deadline 1800]
        [--gc serve|default] [--no-defer-gc] [--limit 1.2] [--limit-mb 10]

The runs go in blocks of 1,000 stateless runs, each with its share of the
threads (100 a block by default). After each block the server's resident set
size (``VmRSS`` of the process) is printed: the curve. The check: RSS after the
soak within ``--limit`` (1.2x) and ``--limit-mb`` (10 MB) of RSS after the
first block (the warm-up); the exit status is 1 if not (or if any request
failed).

The collector: ``--gc serve`` (the default) as ``deepactors serve`` sets it
(``tune_gc``: young collections every 50,000 net allocations, so they seldom
fall due during a run); ``--gc default`` keeps CPython's thresholds (700), so
collections fall due during runs all the time, and ``defer_gc``'s deferral and
hand-back (``deepactors/actors/_heap.py``) are what keeps the curve flat.
``--no-defer-gc`` is the floor: the same soak without ``defer_gc``.

``--run-retention`` and ``--idle-timeout`` are the server's ``run_retention``
and ``idle_timeout``: what the server holds at the plateau is about (runs of
threads per second) x (those seconds) x (a run's values), so they are short
here (the first block ends on the plateau), where the defaults (60 s and 300 s)
reach it after minutes.
``--quick``: 2,000 runs and 200 threads. Bounded by ``--deadline`` seconds; the
server process is stopped at the end.
"""

from __future__ import annotations

import argparse
import inspect
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

BLOCK = 1000
"""Stateless runs between two samples of the server's RSS."""


# -- the server process ------------------------------------------------------------------


def build_agent() -> Any:
    """An agent that answers at once with as many characters as the message asks for."""
    from deepactors import AssistantMessage, create_deep_agent
    from deepactors.models import FunctionModel, ModelRequest

    def answer(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content="x" * int(request.messages[-1].text))

    # Streamed in pieces of 4 KB: the soak is about memory, not 12,500 token
    # events per answer (what FunctionModel's default 8 characters would make).
    return create_deep_agent(FunctionModel(answer, stream_chunk=4096))


def serve_process(
    port: int,
    loop: str,
    db: str,
    run_retention: float,
    idle: float,
    *,
    defer_gc: bool = True,
    serve_gc: bool = True,
) -> None:
    """The server side, until SIGTERM: the app as ``deepactors serve --db`` builds it."""
    from deepactors.persistence import open_checkpointer, open_store
    from deepactors.server import create_app, tune_gc

    # A tree from before run_retention (bench/ab.py --base) soaks without it.
    known = inspect.signature(create_app).parameters
    retention = {"run_retention": run_retention} if "run_retention" in known else {}
    if "max_runs_per_client" in known:  # every client has one address
        retention["max_runs_per_client"] = None
    app = create_app(
        {"agent": build_agent()},
        checkpointer=open_checkpointer(db),
        store=open_store(db),
        idle_timeout=idle,
        defer_gc=defer_gc,  # as deepactors serve does (unless --no-defer-gc)
        max_streams_per_client=None,  # every client has one address
        **retention,
    )
    if serve_gc:
        tune_gc()  # as deepactors serve does

    async def main() -> None:
        if loop == "asyncio":
            import uvicorn

            settings = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            await uvicorn.Server(settings).serve()
            return
        import trio
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.loglevel = "WARNING"
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

            async def stop() -> None:
                async for _ in signals:
                    return

            await serve(app, config, shutdown_trigger=stop)  # type: ignore[arg-type]

    anyio.run(main, backend=loop, backend_options={"use_uvloop": True} if _uvloop(loop) else {})


def _uvloop(loop: str) -> bool:
    if loop != "asyncio":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def rss_mb(pid: int) -> float:
    """The resident set size of a process now, in MiB (``VmRSS``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the clients -------------------------------------------------------------------------


class Soak:
    """The client side: blocks of runs, and the server's RSS after each."""

    def __init__(self, url: str, pid: int, args: argparse.Namespace) -> None:
        self.url = url
        self.pid = pid
        self.args = args
        self.errors: list[str] = []
        self.done_runs = 0
        self.done_threads = 0

    async def _post(self, http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
        try:
            answer = await http.post(path, json=body)
        except httpx.HTTPError as exc:
            self.errors.append(f"{path}: {exc!r}")
            return None
        if answer.status_code != 200:
            self.errors.append(f"{path}: {answer.status_code} {answer.text[:200]}")
            return None
        return answer.json()

    async def _stateless(self, http: httpx.AsyncClient) -> None:
        body = {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": str(self.args.size)}]},
        }
        got = await self._post(http, "/runs/wait", body)
        if got is not None and len(got["messages"][-1]["content"]) != self.args.size:
            self.errors.append("/runs/wait: a short answer")
        self.done_runs += 1

    async def _thread(self, http: httpx.AsyncClient) -> None:
        thread = await self._post(http, "/threads", {})
        if thread is None:
            return
        body = {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": str(self.args.thread_size)}]},
        }
        await self._post(http, f"/threads/{thread['thread_id']}/runs/wait", body)
        self.done_threads += 1

    async def block(self, http: httpx.AsyncClient, runs: int, threads: int) -> None:
        """``runs`` stateless runs and ``threads`` threads, by ``--clients`` at a time."""
        # The threads spread over the block, one every so many stateless runs.
        ordered = [self._stateless] * runs
        step = max(1, runs // max(threads, 1))
        for i in reversed(range(threads)):
            ordered.insert(min(runs, i * step), self._thread)
        send, receive = anyio.create_memory_object_stream[Any](len(ordered))
        for job in ordered:
            send.send_nowait(job)
        send.close()

        async def worker() -> None:
            async for job in receive:
                await job(http)

        async with anyio.create_task_group() as tg:
            for _ in range(self.args.clients):
                tg.start_soon(worker)


async def soak(url: str, pid: int, args: argparse.Namespace) -> int:
    """Run the blocks, print the curve and the check; the exit status."""
    runner = Soak(url, pid, args)
    blocks = max(1, args.runs // BLOCK)
    per_block = [
        args.threads // blocks + (1 if i < args.threads % blocks else 0) for i in range(blocks)
    ]
    print(f"server RSS at start: {rss_mb(pid):.0f} MB")
    print(f"{'runs':>7} {'threads':>8} {'RSS MB':>8} {'x first':>8} {'s':>6}")
    curve: list[float] = []
    t0 = time.monotonic()
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        for i in range(blocks):
            if time.monotonic() - t0 > args.deadline:
                print(f"deadline of {args.deadline:.0f} s passed: stopped after {i} blocks")
                break
            await runner.block(http, BLOCK, per_block[i])
            curve.append(rss_mb(pid))
            ratio = curve[-1] / curve[0]
            print(
                f"{runner.done_runs:>7} {runner.done_threads:>8} {curve[-1]:>8.0f}"
                f" {ratio:>7.2f}x {time.monotonic() - t0:>6.0f}",
                flush=True,
            )
    wall = time.monotonic() - t0
    if args.settle > 0:
        await anyio.sleep(args.settle)
        print(f"after {args.settle:g} s more, idle: {rss_mb(pid):.0f} MB")
    ratio = curve[-1] / curve[0]
    grown = curve[-1] - curve[0]
    ok = ratio <= args.limit and grown <= args.limit_mb and not runner.errors
    print(
        f"{runner.done_runs} stateless runs, {runner.done_threads} threads in {wall:.0f} s"
        f" ({(runner.done_runs + runner.done_threads) / wall:.0f} runs/s), "
        f"{len(runner.errors)} errors{': ' + runner.errors[0] if runner.errors else ''}"
    )
    print(
        f"RSS after the soak {curve[-1]:.0f} MB, after the first {BLOCK} runs {curve[0]:.0f} MB:"
        f" {ratio:.2f}x, {grown:+.0f} MB (limits {args.limit:g}x, {args.limit_mb:g} MB)"
        f" {'OK' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=2_000)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--thread-size", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--run-retention", type=float, default=1.0)
    parser.add_argument("--idle-timeout", type=float, default=1.0)
    parser.add_argument("--limit", type=float, default=1.2)
    parser.add_argument("--limit-mb", type=float, default=10.0, help="MB of growth allowed")
    parser.add_argument("--gc", choices=["serve", "default"], default="serve")
    parser.add_argument("--no-defer-gc", action="store_true", help="the floor: no defer_gc")
    parser.add_argument("--settle", type=float, default=0.0, help="seconds idle, then RSS again")
    parser.add_argument("--quick", action="store_true", help="2,000 runs, 200 threads")
    parser.add_argument("--deadline", type=float, default=1800.0)
    parser.add_argument("--db", help="the SQLite file (default: a temporary one)")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args()
    if args.serve is not None:
        serve_process(
            args.serve,
            args.loop,
            args.db,
            args.run_retention,
            args.idle_timeout,
            defer_gc=not args.no_defer_gc,
            serve_gc=args.gc == "serve",
        )
        return
    if args.quick:
        args.runs, args.threads = 2_000, 200
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "soak.db")
        port = _free_port()
        command = [
            sys.executable,
            __file__,
            "--serve",
            str(port),
            "--loop",
            args.loop,
            "--db",
            db,
            "--run-retention",
            str(args.run_retention),
            "--idle-timeout",
            str(args.idle_timeout),
            "--gc",
            args.gc,
            *(["--no-defer-gc"] if args.no_defer_gc else []),
        ]
        server = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_until_up(url, server)
            print(
                f"soak: {args.runs} stateless runs of {args.size} chars, {args.threads} threads"
                f" of {args.thread_size}, {args.clients} clients, {args.loop}"
                f" ({'hypercorn' if args.loop == 'trio' else 'uvicorn'}), SQLite --db,"
                f" run_retention={args.run_retention:g} s, idle_timeout={args.idle_timeout:g} s,"
                f" gc {args.gc}, defer_gc {'off' if args.no_defer_gc else 'on'}"
            )
            status = anyio.run(soak, url, server.pid, args)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    sys.exit(status)


def _wait_until_up(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None:
            sys.exit(f"soak: the server exited ({server.returncode})")
        try:
            if httpx.get(f"{url}/ok").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            sys.exit("soak: the server did not start")
        time.sleep(0.1)


if __name__ == "__main__":
    main()

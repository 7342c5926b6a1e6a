"""W7: many concurrent streaming runs against one server, beside an HTTP floor and in-process.

Each run is W2-shaped: the main agent fans out to ``--fanout`` subagents that do
3 model turns each (two calls of a trivial tool, then an answer), at 50 ms
simulated latency per model call; then one final main turn. ``--runs``
streaming runs are started at once through the real ``langgraph-sdk`` async
client (stateless ``/runs/stream``, ``stream_mode="updates"``) against one
``deepactors serve``-style server process on 127.0.0.1 (uvicorn/asyncio or
hypercorn/trio), which also runs a 5 ms timer to measure how late its event
loop gets. The same runs are then made in-process (``agent.astream`` under one
``open_runtime``), so the difference is the cost of HTTP and SSE.

    python bench/w7_serve.py [--runs 1000] [--fanout 3] [--loop asyncio|trio] [--repeats 3]
    python bench/w7_serve.py --workers 2 [--db postgresql://...] [--runs 300]

With ``--workers N``, N server processes share their runs through one
PostgreSQL database (``--db``, else a private durable server started for the
bench): see ``_w7_workers.py`` for what that measures (throughput with 1 and N
processes, and the latency of cancelling a run through another process).

The server runs asyncio on uvloop when it is installed, as ``deepactors serve``
does (uvicorn's ``loop="auto"``); ``W7_UVLOOP=0`` runs plain asyncio. Other
knobs for experiments: ``W7_PACING`` (seconds, or ``off``), ``W7_GC=default``
(CPython's collector settings instead of the ``tune_gc`` and ``defer_gc`` that
``deepactors serve`` sets), ``W7_PROFILE=path``, ``W7_AUTH=1`` (clients
authenticate with an API key, ``create_app(auth=api_keys(...))``: what
authentication adds to each request).

Three sides: the **floor** (a bare ASGI app on the same server and loop that
parses the request and streams the run's shape, the metadata event at once and
one ``updates`` event per 50 ms turn of the critical path, with no agent behind
it: what HTTP, the loop and the client cost alone), deepactors' server through a
lean raw-socket client and through the SDK's client (whose own CPU, several ms
per run on the same cores, dominates its figures), and the runs in-process.

Prints, per side, the median over the repeats of: p50/p99 time to the first
event (metadata on the wire; the run's first ``updates`` part), wall time and
throughput, errors, CPU per run of the process that runs the agents (the server
process, or the in-process one), its peak RSS and the worst and p99 lateness of
its 5 ms timer. Loopback only, bounded by ``--deadline`` seconds per
repeat, and the server process is stopped at the end. Figures are indicative:
the client, the server and other work share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).parent))

from _common import peak_rss_mb
from _w7_clients import BENCH_KEY, over_http, over_raw, percentile
from w2_fanout import LATENCY, child_turn, lookup

from deepactors import AssistantMessage, ToolCall, create_deep_agent, open_runtime
from deepactors.models import FunctionModel, ModelRequest


async def block() -> str:
    """Wait until cancelled (the cross-process cancel measure)."""
    await anyio.sleep_forever()
    return "never"


def build_agent(fanout: int) -> Any:
    """The W2 tree with ``fanout`` children per run (latency 50 ms per model call).

    The runs are stateless on both sides (no thread, nothing checkpointed), as
    the server runs ``/runs/stream`` without a thread id. Asked ``block``, the
    main agent calls a tool that waits until cancelled.
    """

    def main_answer(request: ModelRequest) -> AssistantMessage:
        if request.messages[0].text == "block":
            return AssistantMessage(tool_calls=[ToolCall(name="block", args={})])
        if len(request.messages) == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": f"topic {i}", "subagent_type": "r"})
                    for i in range(fanout)
                ]
            )
        return AssistantMessage(content=f"report from {len(request.messages) - 2} findings")

    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
        "model": FunctionModel(lambda r: child_turn(r.messages), latency=LATENCY),
    }
    return create_deep_agent(
        FunctionModel(main_answer, latency=LATENCY), tools=[lookup, block], subagents=[child]
    )


# -- the server process ------------------------------------------------------------------


class _Ticker:
    """A 5 ms timer in the server's loop; how late it fires is the loop's health."""

    def __init__(self) -> None:
        self.late: list[float] = []
        self.first: list[float] = []  # request in -> first body byte out, in the server
        self.cpu0 = time.process_time()

    def reset(self) -> None:
        self.late.clear()
        self.first.clear()
        self.cpu0 = time.process_time()

    async def run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await anyio.sleep(0.005)
            self.late.append(time.perf_counter() - t0 - 0.005)

    def stats(self) -> dict[str, float]:
        late = sorted(self.late) or [0.0]
        first = sorted(self.first) or [float("nan")]
        return {
            "server_first_p50_ms": first[len(first) // 2] * 1000,
            "server_first_p99_ms": first[min(len(first) - 1, int(len(first) * 0.99))] * 1000,
            "timer_worst_ms": late[-1] * 1000,
            "timer_p99_ms": late[int(len(late) * 0.99) - 1 if len(late) > 1 else 0] * 1000,
            "rss_mb": peak_rss_mb(),
            "cpu_s": time.process_time() - self.cpu0,  # the whole process, threads too
        }


async def floor_app(scope: Any, receive: Any, send: Any) -> None:
    """The HTTP floor: a bare ASGI app that streams a run's shape with no agent behind it.

    It reads and parses the request, sends the SSE headers and the ``metadata``
    event at once, then one ``updates`` event per model turn of the W2 tree's
    critical path (5 x 50 ms): what the server, the loop and the client cost
    with nothing else to do.
    """
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    json.loads(body or b"{}")
    headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    chunk = b'event: metadata\r\ndata: {"run_id":"floor","attempt":1}\r\n\r\n'
    await send({"type": "http.response.body", "body": chunk, "more_body": True})
    for step in range(5):
        await anyio.sleep(LATENCY)
        chunk = f'event: updates\r\ndata: {{"step":{step}}}\r\n\r\n'.encode()
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def serve_process(
    port: int, loop: str, fanout: int, runs_db: str | None = None, floor: bool = False
) -> None:
    """The server side: the app plus ``/bench/stats`` and ``/bench/reset``, until SIGTERM."""
    from deepactors.server import create_app, tune_gc

    pacing = os.environ.get("W7_PACING")  # an experiment's knob: seconds, or "off"
    tuned = os.environ.get("W7_GC") != "default"
    app: Any = floor_app
    if not floor:
        extra: dict[str, Any] = {}
        if os.environ.get("W7_AUTH") == "1":
            from deepactors.server.auth import api_keys

            extra["auth"] = api_keys({BENCH_KEY: "bench"})
        app = create_app(
            {"agent": build_agent(fanout)},
            runs_db=runs_db,
            defer_gc=tuned,  # as deepactors serve does
            # One client address opens every stream: no per-client cap here.
            max_streams_per_client=None,
            max_runs_per_client=None,
            **extra,
            **({} if pacing is None else {"pacing": None if pacing == "off" else float(pacing)}),
        )
    if tuned:
        tune_gc()  # as `deepactors serve` does
    ticker = _Ticker()
    profile_to = os.environ.get("W7_PROFILE")
    profiler = cProfile.Profile()

    async def bench_app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/bench/"):
            if scope["path"] == "/bench/reset":
                ticker.reset()
                if profile_to:  # W7_PROFILE=path: cProfile the server between reset and stats
                    profiler.enable()
            elif profile_to:
                profiler.disable()
                profiler.dump_stats(profile_to)
            body = json.dumps(ticker.stats()).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] != "http" or not scope["path"].endswith("/stream"):
            await app(scope, receive, send)
            return
        t0 = time.perf_counter()
        timed = False

        async def timed_send(message: Any) -> None:
            nonlocal timed
            if not timed and message["type"] == "http.response.body":
                timed = True
                ticker.first.append(time.perf_counter() - t0)
            await send(message)

        await app(scope, receive, timed_send)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker.run)
            if loop == "asyncio":
                import uvicorn

                config = uvicorn.Config(
                    bench_app, host="127.0.0.1", port=port, log_level="warning", backlog=4096
                )
                await uvicorn.Server(config).serve()
            else:
                import trio
                from hypercorn.config import Config
                from hypercorn.trio import serve

                config = Config()
                config.bind = [f"127.0.0.1:{port}"]
                config.backlog = 4096
                config.loglevel = "WARNING"
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

                    async def stop() -> None:
                        async for _ in signals:
                            return

                    await serve(bench_app, config, shutdown_trigger=stop)
            tg.cancel_scope.cancel()

    # As `deepactors serve` runs (uvicorn's loop="auto"): asyncio on uvloop when
    # it is installed, for the floor and for deepactors alike. W7_UVLOOP=0: not.
    anyio.run(main, backend=loop, backend_options={"use_uvloop": True} if _uvloop(loop) else {})


def _uvloop(loop: str) -> bool:
    """Whether the server runs ``loop`` on uvloop (asyncio, installed, not W7_UVLOOP=0)."""
    if loop != "asyncio" or os.environ.get("W7_UVLOOP") == "0":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


async def _in_process(runs: int, fanout: int, deadline: float) -> dict[str, Any]:
    agent = build_agent(fanout)
    first: list[float] = []
    first_state: list[float] = []
    errors: list[str] = []
    ticker = _Ticker()

    async def one(rt: Any, i: int) -> None:
        t0 = time.perf_counter()
        try:
            # Stateless, as the server runs /runs/stream without a thread.
            async with agent.astream("go", runtime=rt) as events:
                seen = False
                async for event in events:
                    if not seen:
                        first.append(time.perf_counter() - t0)
                        seen = True
                    if type(event).__name__ == "StateUpdated" and len(first_state) < len(first):
                        first_state.append(time.perf_counter() - t0)
        except Exception as exc:
            errors.append(repr(exc))

    async with anyio.create_task_group() as outer:
        outer.start_soon(ticker.run)
        ticker.reset()
        t0 = time.perf_counter()
        with anyio.fail_after(deadline):
            async with open_runtime() as rt, anyio.create_task_group() as tg:
                for i in range(runs):
                    tg.start_soon(one, rt, i)
        wall = time.perf_counter() - t0
        outer.cancel_scope.cancel()
    return {
        "first": first,
        "first_state": first_state,
        "wall": wall,
        "errors": errors,
        **ticker.stats(),
    }


def _row(name: str, reps: list[dict[str, Any]], runs: int) -> str:
    def med(f: Any) -> float:
        return statistics.median(f(r) for r in reps)

    parts = [
        f"  {name:10} first event p50 {med(lambda r: percentile(r['first'], 0.5)) * 1000:7.1f} ms"
        f" p99 {med(lambda r: percentile(r['first'], 0.99)) * 1000:7.1f} ms",
        f"first update p50 {med(lambda r: percentile(r['first_state'], 0.5)) * 1000:7.1f} ms",
        f"wall {med(lambda r: r['wall']):6.2f} s = {runs / med(lambda r: r['wall']):6.1f} runs/s",
        f"errors {max(len(r['errors']) for r in reps)}",
        f"CPU {med(lambda r: r['cpu_s']) / runs * 1000:5.1f} ms/run",
    ]
    if "client_cpu_s" in reps[0]:
        parts.append(f"client CPU {med(lambda r: r['client_cpu_s']) / runs * 1000:5.1f} ms/run")
    parts.append(
        f"timer late worst {med(lambda r: r['timer_worst_ms']):6.1f} ms"
        f" p99 {med(lambda r: r['timer_p99_ms']):5.1f} ms"
    )
    parts.append(f"peak RSS {med(lambda r: r['rss_mb']):5.0f} MiB")
    if "server_first_p50_ms" in reps[0]:
        parts.append(
            f"in server: first event p50 {med(lambda r: r['server_first_p50_ms']):6.1f} ms"
            f" p99 {med(lambda r: r['server_first_p99_ms']):6.1f} ms"
        )
    return " | ".join(parts)


@contextlib.contextmanager
def _server(args: argparse.Namespace, *, floor: bool) -> Iterator[str]:
    """A server process (``--floor``: the bare ASGI floor) on a free port; its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, __file__, "--serve", str(port), "--loop", args.loop]
    cmd += ["--fanout", str(args.fanout), *(["--floor"] if floor else [])]
    server = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(f"{url}/bench/stats")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--fanout", type=int, default=3)
    parser.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds per repeat")
    parser.add_argument(
        "--client", choices=("raw", "sdk", "both"), default="both", help="load client(s)"
    )
    parser.add_argument("--workers", type=int, help="server processes sharing one database")
    parser.add_argument("--db", help="postgresql://... for --workers (default: a private one)")
    parser.add_argument("--cancels", type=int, default=50, help="cross-process cancels measured")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server role
    parser.add_argument("--runs-db", help=argparse.SUPPRESS)  # the server role, shared runs
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)  # floor server
    args = parser.parse_args()
    if args.serve:
        serve_process(args.serve, args.loop, args.fanout, args.runs_db, args.floor)
        return
    if args.workers:
        from _w7_workers import run_workers

        run_workers(args, _row)
        return
    on_uvloop = " (uvloop)" if _uvloop(args.loop) else ""
    print(
        f"W7: {args.runs} concurrent streaming runs, fan-out {args.fanout} (W2 children, "
        f"{LATENCY * 1000:.0f} ms per model call), server on {args.loop}{on_uvloop}; "
        f"median of {args.repeats} (indicative: shared CPU)"
    )
    if args.client in ("raw", "both"):
        with _server(args, floor=True) as url:
            floor = [
                asyncio.run(over_raw(url, args.runs, args.deadline)) for _ in range(args.repeats)
            ]
        print(_row("floor HTTP", floor, args.runs))
    with _server(args, floor=False) as url:
        if args.client in ("raw", "both"):
            raw = [
                asyncio.run(over_raw(url, args.runs, args.deadline)) for _ in range(args.repeats)
            ]
            print(_row("raw HTTP", raw, args.runs))
        if args.client in ("sdk", "both"):
            sdk = [
                asyncio.run(over_http(url, args.runs, args.deadline)) for _ in range(args.repeats)
            ]
            print(_row("SDK HTTP", sdk, args.runs))
    local = [
        anyio.run(_in_process, args.runs, args.fanout, args.deadline, backend=args.loop)
        for _ in range(args.repeats)
    ]
    print(_row("in-process", local, args.runs))


if __name__ == "__main__":
    main()

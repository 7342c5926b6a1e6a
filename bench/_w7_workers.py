"""W7 with several server processes sharing their runs through one PostgreSQL database.

``python bench/w7_serve.py --workers N [--db postgresql://...]``:

0. **Floor.** The same runs against 1 process that shares nothing (no database).
1. **Throughput.** The same ``--runs`` concurrent W2-shaped streaming runs, on
   threads this time (so every run is registered in the shared database), first
   against 1 server process, then against N (each on its own port, all with
   ``runs_db`` = the one database). Each run makes its thread through process
   ``i % N`` and streams it through process ``(i + 1) % N``: with N > 1 every
   run crosses processes (the thread is found through the database). Printed:
   the usual W7 row per setting, and the throughput ratio N : 1.
2. **Cross-process cancel** (N > 1): ``--cancels`` times, a run that blocks
   until cancelled is created through process A and, once it is under way,
   cancelled through process B (``cancel(wait=True)``). Printed: p50/p99 of the
   time until the run stopped in A (A's record of its end minus the moment the
   cancel was sent; one machine, one clock), and of the whole ``cancel`` call
   as the client sees it (B waits until it sees the run's end).

Without ``--db`` a private PostgreSQL server is started with its crash-safe
defaults (``tests/pgserver.py``, ``durable=True``) and removed at the end.
Threads live in memory in each process (a thread is new at its only run).
Figures are indicative: the client, the servers and PostgreSQL share the cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from _common import StreamTimes

_REPO = Path(__file__).resolve().parent.parent


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _servers(n: int, args: argparse.Namespace, dsn: str) -> Iterator[list[str]]:
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for _ in range(n):
            port = _port()
            cmd = [sys.executable, str(Path(__file__).with_name("w7_serve.py")), "--serve"]
            cmd += [str(port), "--loop", args.loop, "--fanout", str(args.fanout)]
            if dsn:
                cmd += ["--runs-db", dsn]
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            procs.append(subprocess.Popen(cmd, env=env))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, "a server process died"
                try:
                    if httpx.get(f"{url}/ok").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "a server process did not start"
                time.sleep(0.05)
        yield urls
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _client(url: str, timeout: float) -> Any:
    from langgraph_sdk.client import LangGraphClient

    # Idle connections are dropped before uvicorn's 5 s keep-alive would close
    # them under a request just sent on one (a ReadError that is not the server's).
    limits = httpx.Limits(max_connections=None, keepalive_expiry=2.0)
    transport = httpx.AsyncHTTPTransport(limits=limits)
    http = httpx.AsyncClient(base_url=url, transport=transport, timeout=httpx.Timeout(timeout))
    return LangGraphClient(http)


async def _throughput(urls: list[str], runs: int, deadline: float) -> dict[str, Any]:
    clients = [_client(u, deadline) for u in urls]
    times = StreamTimes()
    first, first_state, errors = times.first, times.first_state, times.errors

    async def one(i: int) -> None:
        a, b = clients[i % len(clients)], clients[(i + 1) % len(clients)]
        t0 = time.perf_counter()
        try:
            thread = await a.threads.create()
        except Exception as exc:  # counted, not fatal
            errors.append(repr(exc))
            return
        parts = b.runs.stream(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": "go"}]},
            stream_mode="updates",
        )
        await times.follow(parts, t0)

    async with httpx.AsyncClient() as side:
        for url in urls:
            await side.post(f"{url}/bench/reset")
    t0 = time.perf_counter()
    async with asyncio.timeout(deadline):
        await asyncio.gather(*(one(i) for i in range(runs)))
    wall = time.perf_counter() - t0
    stats: list[dict[str, float]] = []
    async with httpx.AsyncClient() as side:
        for url in urls:
            stats.append((await side.get(f"{url}/bench/stats")).json())
    for client in clients:
        await client.aclose()
    return {
        "first": first,
        "first_state": first_state,
        "wall": wall,
        "errors": errors,
        "cpu_s": sum(s["cpu_s"] for s in stats),  # every server process
        "timer_worst_ms": max(s["timer_worst_ms"] for s in stats),
        "timer_p99_ms": max(s["timer_p99_ms"] for s in stats),
        "rss_mb": max(s["rss_mb"] for s in stats),
        "server_first_p50_ms": max(s["server_first_p50_ms"] for s in stats),
        "server_first_p99_ms": max(s["server_first_p99_ms"] for s in stats),
    }


async def _cancels(urls: list[str], count: int) -> tuple[list[float], list[float]]:
    a, b = _client(urls[0], 30), _client(urls[1], 30)
    stopped: list[float] = []
    round_trip: list[float] = []
    for _ in range(count):
        thread = await a.threads.create()
        run = await a.runs.create(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": "block"}]},
            stream_mode="updates",
        )
        async for part in a.runs.join_stream(thread["thread_id"], run["run_id"]):
            if part.event == "updates":
                break  # under way: the model asked for the blocking tool
        sent, t0 = time.time(), time.perf_counter()
        await b.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
        round_trip.append(time.perf_counter() - t0)
        record = await a.runs.get(thread["thread_id"], run["run_id"])
        assert record["status"] == "interrupted", record
        stopped.append(datetime.fromisoformat(record["updated_at"]).timestamp() - sent)
    await a.aclose()
    await b.aclose()
    return stopped, round_trip


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@contextlib.contextmanager
def _database(dsn: str | None) -> Iterator[str]:
    if dsn is not None:
        yield dsn
        return
    sys.path.insert(0, str(_REPO))
    from tests.pgserver import PostgresServer

    with PostgresServer(durable=True, max_connections=400) as server:
        yield server.dsn


def run_workers(
    args: argparse.Namespace, row: Callable[[str, list[dict[str, Any]], int], str]
) -> None:
    """The ``--workers`` bench (see the module docstring)."""
    with _database(args.db) as dsn:
        print(
            f"W7 workers: {args.runs} concurrent streaming runs on threads, fan-out "
            f"{args.fanout}, {args.loop}; runs shared through PostgreSQL; median of "
            f"{args.repeats} (indicative: shared CPU)"
        )
        with _servers(1, args, "") as urls:  # the floor: no database, runs of its own
            reps = [
                asyncio.run(_throughput(urls, args.runs, args.deadline))
                for _ in range(args.repeats)
            ]
            print(row("1, no db", reps, args.runs))
        walls: dict[int, float] = {}
        for n in sorted({1, args.workers}):
            with _servers(n, args, dsn) as urls:
                reps = [
                    asyncio.run(_throughput(urls, args.runs, args.deadline))
                    for _ in range(args.repeats)
                ]
                print(row(f"{n} process" + ("es" if n > 1 else ""), reps, args.runs))
                for error in sorted({e for r in reps for e in r["errors"]})[:3]:
                    print(f"    error: {error[:300]}")
                walls[n] = statistics.median(r["wall"] for r in reps)
                if n > 1:
                    stopped, trip = asyncio.run(_cancels(urls, args.cancels))
                    print(
                        f"  cancel through another process ({len(stopped)}x): run stopped "
                        f"p50 {_pct(stopped, 0.5) * 1000:.1f} ms p99 "
                        f"{_pct(stopped, 0.99) * 1000:.1f} ms | cancel(wait=True) call "
                        f"p50 {_pct(trip, 0.5) * 1000:.1f} ms p99 {_pct(trip, 0.99) * 1000:.1f} ms"
                    )
        if args.workers > 1:
            print(f"  throughput ratio {args.workers} : 1 = {walls[1] / walls[args.workers]:.2f}")

"""What a wide fan-out costs while its calls wait for the run's cap (issue 34, item 10).

A model asks for N ``task`` calls in one answer; each child that starts blocks
(a model call that never answers), so at most the cap of them work and the rest
queue. Once the step has started all it will, the run's memory above the
process's start is read, and the run is cancelled. Beside it, the floor: the
same answer (N ``ToolCall`` objects in an ``AssistantMessage``) held alone,
which any harness must hold. Also printed, in ms: the worst lateness of a 5 ms
timer beside the run until then (how long the event loop was not served), and
beside it the floor's: the time to build that answer, a stretch with no await
that a model adapter parsing such an answer spends too.

    python bench/fanout_queue.py [--n 100000] [--caps 16 1000] [--loops asyncio trio]

Each figure is one run in a fresh interpreter (peak RSS is per process); the
median of ``--repeats`` runs is printed.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _calls(n: int) -> Any:
    from deepactors import AssistantMessage, ToolCall

    return AssistantMessage(
        tool_calls=[
            ToolCall(name="task", args={"description": f"topic {i}", "subagent_type": "w"})
            for i in range(n)
        ]
    )


async def _ours(n: int, cap: int | None) -> dict[str, float]:
    from deepactors import AssistantMessage, create_deep_agent
    from deepactors.models import FunctionModel, ModelRequest

    started = 0
    enough = anyio.Event()
    want = n if cap is None else min(cap, n)

    async def child(request: ModelRequest) -> str:
        nonlocal started
        started += 1
        if started >= want:
            enough.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def main(request: ModelRequest) -> AssistantMessage:
        return _calls(n)  # made after ``base`` is read, as the floor's

    agent = create_deep_agent(
        FunctionModel(main),
        subagents=[
            {"name": "w", "description": "w", "system_prompt": "w", "model": FunctionModel(child)}
        ],
        max_concurrent_subagents=cap,
    )
    base = _rss_mb()
    late = 0.0

    async def ticker() -> None:
        nonlocal late
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.005)
            now = time.perf_counter()
            late = max(late, now - last - 0.005)
            last = now

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        tg.start_soon(agent.ainvoke, "go")
        await enough.wait()
        # Until the step has queued what it does not start: memory stops growing.
        held = _rss_mb() - base
        while True:
            await anyio.sleep(0.5)
            now = _rss_mb() - base
            if now - held < 1.0:
                break
            held = now
        tg.cancel_scope.cancel()
    return {
        "mb": held,
        "late_ms": late * 1000,
        "setup_s": time.perf_counter() - t0,
        "started": started,
    }


async def _floor(n: int) -> dict[str, float]:
    base = _rss_mb()
    t0 = time.perf_counter()
    answer = _calls(n)  # one stretch with no await: the loop waits all of it
    took = time.perf_counter() - t0
    held = _rss_mb() - base
    assert len(answer.tool_calls) == n
    return {"mb": held, "late_ms": took * 1000, "setup_s": took, "started": 0}


def worker(kind: str, n: int, cap: int | None, loop: str) -> None:
    from deepactors import create_deep_agent  # noqa: F401  (imports outside the figure)

    result = (
        anyio.run(_floor, n, backend=loop)
        if kind == "floor"
        else anyio.run(_ours, n, cap, backend=loop)
    )
    print("RESULT " + json.dumps(result), flush=True)


def _one(kind: str, n: int, cap: int | None, loop: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, str(n), str(cap), loop],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return dict(json.loads(line[7:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--caps", nargs="+", default=["16", "1000"], help="'none': no cap")
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, n, cap, loop = args.worker
        worker(kind, int(n), None if cap == "None" else int(cap), loop)
        return
    print(
        f"N = {args.n} task calls in one answer; MB held above the start, median of {args.repeats}"
    )
    heads = ("floor MB", "ours MB", "ours/floor", "floor late", "ours late", "started")
    print(f"{'loop':8} {'cap':>6} " + " ".join(f"{h:>10}" for h in heads))
    for loop in args.loops:
        for cap_arg in args.caps:
            cap = None if cap_arg == "none" else int(cap_arg)
            floors, ours = [], []
            for _ in range(args.repeats):  # alternated: a change in load hits both
                floors.append(_one("floor", args.n, None, loop))
                ours.append(_one("ours", args.n, cap, loop))
            f = statistics.median(r["mb"] for r in floors)
            o = statistics.median(r["mb"] for r in ours)
            late = statistics.median(r["late_ms"] for r in ours)
            floor_late = statistics.median(r["late_ms"] for r in floors)
            started = statistics.median(r["started"] for r in ours)
            cells = (
                f"{f:.1f}",
                f"{o:.1f}",
                f"{o / f:.2f}",
                f"{floor_late:.0f}",
                f"{late:.0f}",
                f"{started:.0f}",
            )
            print(f"{loop:8} {cap_arg:>6} " + " ".join(f"{c:>10}" for c in cells))


if __name__ == "__main__":
    main()

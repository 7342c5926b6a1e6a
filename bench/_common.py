"""Shared pieces of the benchmarks: timers, RSS, result tables."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 1024 / 1024


@dataclass(slots=True)
class Measured:
    wall: float
    cpu: float
    timer_late: float
    value: Any


async def measure(work: Callable[[], Awaitable[Any]], *, period: float = 0.005) -> Measured:
    """Run ``work`` beside a periodic timer; return wall, CPU and the timer's worst lateness."""
    worst = 0.0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal worst
        while not done.is_set():
            t0 = time.perf_counter()
            await anyio.sleep(period)
            worst = max(worst, time.perf_counter() - t0 - period)

    value: Any = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.02)  # let the ticker settle before the clock starts
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            value = await work()
        finally:
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            done.set()
    return Measured(wall=wall, cpu=cpu, timer_late=worst, value=value)

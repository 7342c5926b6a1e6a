"""Shared pieces of the benchmarks: timers, GC pauses, RSS, worker processes."""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 1024 / 1024


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mb() -> float:
    """Resident set size of this process now, in MiB (Linux; else the peak so far)."""
    kib = _status_kib("VmRSS")
    return kib / 1024 if kib is not None else peak_rss_mb()


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0), so a run's own peak can be read."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def run_peak_rss_mb() -> float:
    """Peak RSS since :func:`reset_peak_rss` (Linux), else since the process began, in MiB."""
    kib = _status_kib("VmHWM")
    return kib / 1024 if kib is not None else peak_rss_mb()


class GcWatch:
    """Times every collection of CPython's cyclic collector, through ``gc.callbacks``.

    A pause is the wall time between the collector's start and stop callbacks:
    what a timer in the same loop waits for. ``longest_cpu`` is the same pause in
    thread CPU time, which another process on the machine cannot inflate.
    """

    __slots__ = ("_c0", "_t0", "collections", "full", "longest", "longest_cpu", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.longest = 0.0
        self.longest_cpu = 0.0
        self.collections = 0
        self.full = 0
        self._t0 = 0.0
        self._c0 = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
            self._c0 = time.thread_time()
            return
        pause = time.perf_counter() - self._t0
        self.total += pause
        self.longest = max(self.longest, pause)
        self.longest_cpu = max(self.longest_cpu, time.thread_time() - self._c0)
        self.collections += 1
        if info["generation"] == 2:
            self.full += 1

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


@dataclass(slots=True)
class Measured:
    """One run's figures.

    ``cpu`` is the whole process's CPU time (``time.process_time``: every thread).
    ``timer_late`` is the worst lateness of a timer beside the run;
    ``timer_late_cpu`` the worst of a timer's lateness that the event loop's
    thread spent on the CPU (the rest: the process was not running, or waited
    for the GIL).
    """

    wall: float
    cpu: float
    timer_late: float
    value: Any
    timer_late_cpu: float = 0.0
    gc_time: float = 0.0
    gc_longest: float = 0.0
    gc_longest_cpu: float = 0.0
    gc_full: int = 0
    rss_mb: float = 0.0


async def measure(work: Callable[[], Awaitable[Any]], *, period: float = 0.005) -> Measured:
    """Run ``work`` beside a periodic timer; return wall, CPU, GC and the timer's worst lateness.

    The timer's lateness is given twice: as measured, and as much of it as the
    loop's thread spent computing (a lower bound of what the run's own work held
    the loop for, which other processes on a shared machine cannot inflate).

    ``rss_mb`` is the run's peak RSS above the RSS it started from (Linux; elsewhere
    the process's peak).
    """
    worst = worst_cpu = 0.0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal worst, worst_cpu
        while not done.is_set():
            t0, c0 = time.perf_counter(), time.thread_time()
            await anyio.sleep(period)
            late = time.perf_counter() - t0 - period
            worst = max(worst, late)
            # What of that lateness the loop's own thread spent computing: on a
            # shared machine a process preempted for 200 ms makes a timer 200 ms
            # late with no work of the run's in the way.
            worst_cpu = max(worst_cpu, min(late, time.thread_time() - c0))

    value: Any = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.02)  # let the ticker settle before the clock starts
        base_rss = rss_mb()
        reset_peak_rss()
        with GcWatch() as watch:
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                value = await work()
            finally:
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                done.set()
    return Measured(
        wall=wall,
        cpu=cpu,
        timer_late=worst,
        timer_late_cpu=worst_cpu,
        value=value,
        gc_time=watch.total,
        gc_longest=watch.longest,
        gc_longest_cpu=watch.longest_cpu,
        gc_full=watch.full,
        rss_mb=run_peak_rss_mb() - base_rss,
    )


def emit_result(m: Measured, **extra: Any) -> None:
    """Print a worker's result as one JSON line (read by :func:`run_worker`)."""
    data = asdict(m)
    data.update(extra)
    print("RESULT " + json.dumps(data, default=str), flush=True)


def run_worker(script: Path, args: Sequence[str]) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter and return its result.

    A fresh process per run keeps runs from inheriting each other's heap, GC
    generations and peak RSS.
    """
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=False
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]
    raise RuntimeError(f"worker {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


class StreamTimes:
    """What a load client records of streamed runs: time to the first part, to the
    first ``updates`` part, and every error (an ``error`` part or an exception)."""

    def __init__(self) -> None:
        self.first: list[float] = []
        self.first_state: list[float] = []
        self.errors: list[str] = []

    async def follow(self, parts: Any, t0: float) -> None:
        """Read a run's stream parts (``langgraph-sdk``'s), timing them from ``t0``.

        A failure is counted, not raised: the figure says how many runs failed.
        """
        seen = False
        try:
            async for part in parts:
                now = time.perf_counter() - t0
                if not seen:
                    self.first.append(now)
                    seen = True
                if part.event == "updates" and len(self.first_state) < len(self.first):
                    self.first_state.append(now)
                if part.event == "error":
                    self.errors.append(str(part.data))
        except Exception as exc:
            self.errors.append(repr(exc))


def machine_info() -> dict[str, Any]:
    """Where and when a benchmark ran: for the JSON output that ``bench/plots.py`` reads."""
    import datetime
    import os
    import platform

    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.release()}",
        "cpus": os.cpu_count(),
        "loadavg_at_end": load,
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a benchmark's figures as JSON (every run, not only the medians)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")

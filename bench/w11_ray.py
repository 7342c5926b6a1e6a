"""W11 Ray: W2's fan-out with CPU-bound children, in process and placed on Ray workers.

The tree of W2 (bench/w2_fanout.py): one main turn emits N ``task`` calls, each
child does 3 model turns (two calls of a trivial tool, then an answer) at 50 ms
simulated latency per model call, one final main turn. Here each child's model
turn also burns a fixed amount of pure-Python CPU (~5 ms on this machine,
``--burn-ms``), standing for an SDK's parsing and a tool's work. Three ways, in
one run of this script, alternating so that a change in the machine's load hits
each alike:

- ``local``: every child in the parent's process (one core does all of it);
- ``ray-1``: the children on one Ray worker actor (``RayPlacement(workers=1)``);
- ``ray-2``: on two worker actors, one per core of a 2-core machine.

    python bench/w11_ray.py [--sizes 1000 10000] [--loops asyncio] [--repeats 3]
                            [--burn-ms 5] [--big 100000] [--deadline 1000] [--json PATH]
                       [--markdown PATH] [--report-window SECONDS]

Every run is a fresh interpreter that starts its own local Ray (2 CPUs, no
dashboard), makes a warm-up run (the workers start and get the agent), then
the measured one. Printed per (loop, N, way), the median of the repeats and
their range:

- wall time, and the speed-up over ``local``;
- CPU ms per child: the parent's process (every thread, Ray's own included),
  the worker actors' processes, and Ray's other processes (raylet, GCS), from
  /proc;
- the parent's peak RSS during the run, and the Ray calls it made (each
  costs it ~0.6-1.8 ms of CPU, whatever it carries; pulls among them).

Then a table of what the measured costs per child predict for one machine of
16 cores and for 10 such machines: the parent's CPU per child bounds how many
children per second one parent can place, the workers' (and Ray's) CPU per
child how many the cores can run.

``--big N`` adds one run of W2 itself (no burn) at N children on ``ray-2``:
its wall time and the parent's peak RSS. ``--deadline N`` adds one run of N
children that wait until cancelled, on ``ray-2`` with Ray's dashboard: the
parent's deadline passes once all of them wait; from then to the last of the
workers' batches ending (as Ray's state API records it, ``end_time_ms``), and
to the parent's call returning.

Wall-clock figures on a shared machine are indicative; the CPU per child is
the robust figure.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _common import emit_result, machine_info, measure, peak_rss_mb, run_worker, write_json
from w2_fanout import CRITICAL_PATH, LATENCY, child_turn, lookup, main_turn

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.events import ToolCallStarted
from deepactors.models import FunctionModel, ModelRequest
from deepactors.placement import RayPlacement

WAYS = ("local", "ray-1", "ray-2")

BURN_ITERATIONS = [0]
"""Iterations of :func:`burn` per child model turn (set by the driver, which
calibrates them once; sent to the workers with the child's model)."""


def burn(iterations: int) -> int:
    """Pure-Python CPU work, the same amount whichever process runs it."""
    x = 0
    for i in range(iterations):
        x = (x + i * i) % 1_000_003
    return x


def calibrate(ms: float) -> int:
    """Iterations of :func:`burn` that take about ``ms`` milliseconds of CPU here (best of 5;
    CPU time, which other processes on the machine cannot inflate)."""
    n = 100_000
    best = min(_timed(n) for _ in range(5))
    return max(1, int(n * ms / 1000 / best))


def _timed(n: int) -> float:
    t0 = time.thread_time()
    burn(n)
    return time.thread_time() - t0


def burning_child(request: ModelRequest) -> AssistantMessage:
    """W2's child turn, after its fixed CPU cost (wherever the child runs)."""
    burn(BURN_ITERATIONS[0])
    return child_turn(request.messages)


def plain_child(request: ModelRequest) -> AssistantMessage:
    """W2's child turn as it is."""
    return child_turn(request.messages)


def make_agent(n: int, burns: bool, placement: RayPlacement | None) -> Any:
    """W2's tree at ``n``, its children in process or placed by ``placement``."""
    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
        "model": FunctionModel(burning_child if burns else plain_child, latency=LATENCY),
    }

    def main_answer(request: ModelRequest) -> AssistantMessage:
        return main_turn(n, request.messages)

    return create_deep_agent(
        FunctionModel(main_answer, latency=LATENCY),
        tools=[lookup],
        subagents=[child],
        max_concurrent_subagents=None,
        placement=placement,
    )


def _start_ray(dashboard: bool = False) -> None:
    import ray

    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    # Ray runs its workers at nice 15 by default: on a machine that other work
    # shares, they would get a sliver of the CPU that `local` (the parent, at the
    # bench's own priority) gets. The same priority for both compares the ways.
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(
        address="local",  # a Ray of its own, never a cluster already running here
        num_cpus=2,
        include_dashboard=dashboard,
        configure_logging=False,
        log_to_driver=False,
    )


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system, every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(root: int) -> list[int]:
    """Every process under ``root`` (Ray's raylet, GCS and workers under this driver)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, pp in parents.items() if pp == pid]
        found += kids
        todo += kids
    return found


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # (ended meanwhile)
            total += cpu_seconds(pid)
    return total


def worker(way: str, backend: str, n: int, burns: bool, window: float | None) -> None:
    placement = None
    if way != "local":
        _start_ray()
        options = {} if window is None else {"report_window": window}
        placement = RayPlacement(workers=int(way.split("-")[1]), **options)
    agent = make_agent(n, burns, placement)

    calls: list[Any] = []

    async def run() -> int:
        result = await agent.ainvoke("go")
        if placement is not None:
            calls.append(await placement.statistics())
        text = result["messages"][-1].text
        failed = [m.text for m in result["messages"] if getattr(m, "status", "") == "error"]
        if failed:
            raise RuntimeError(f"{len(failed)} children failed, e.g. {failed[0]}")
        return int(text.split()[2])

    # Warm-up on the same placement: Ray and its workers start, imports, caches.
    anyio.run(make_agent(10, burns, placement).ainvoke, "go", backend=backend)
    workers: list[int] = []
    if placement is not None:
        found = anyio.run(placement.worker_statistics, backend=backend)
        workers = [s.where.pid for s in found]
    others = [p for p in descendants(os.getpid()) if p not in workers]
    # What the parent's process spends idle, per second (Ray's threads, the loop's
    # timers): a slow run's parent pays it for longer, whatever its children.
    pause = functools.partial(anyio.sleep, 3.0)
    idle = anyio.run(functools.partial(measure, pause, period=0.5), backend=backend)
    w0, o0 = _cpu_of(workers), _cpu_of(others)
    # A timer of 0.5 s beside the run, not _common's 5 ms one: the parent of a
    # placed fan-out idles for seconds, and a 5 ms timer alone costs it ~3% of a
    # core, which would read as ~1 ms per child here.
    m = anyio.run(functools.partial(measure, run, period=0.5), backend=backend)
    assert m.value == n, f"{way} returned {m.value} findings, expected {n}"
    emit_result(
        m,
        worker_cpu=_cpu_of(workers) - w0,
        ray_cpu=_cpu_of(others) - o0,
        peak_rss_mb=peak_rss_mb(),
        idle_cpu_per_s=idle.cpu / idle.wall,
        ray_calls=calls[0].calls if calls else 0,
        pulls=calls[0].pulls if calls else 0,
    )


# -- the deadline run --------------------------------------------------------------------


def blocker_turn(request: ModelRequest) -> AssistantMessage:
    """A child that never ends by itself: it waits in a tool until cancelled."""
    return AssistantMessage(tool_calls=[ToolCall(name="wait_here", args={})])


async def wait_here() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return "never"


def deadline_worker(backend: str, n: int) -> None:
    """N blocked children on two workers; the parent's deadline passes once all wait."""
    _start_ray(dashboard=True)
    from ray.util.state import get_task, list_tasks

    placement = RayPlacement(workers=2)

    def main_answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": f"wait {i}", "subagent_type": "b"})
                for i in range(n)
            ]
            return AssistantMessage(tool_calls=calls)
        return AssistantMessage(content="done")

    agent = create_deep_agent(
        FunctionModel(main_answer),
        subagents=[
            {
                "name": "b",
                "description": "waits",
                "system_prompt": "Wait.",
                "tools": [wait_here],
                "model": FunctionModel(blocker_turn),
            }
        ],
        max_concurrent_subagents=None,
        placement=placement,
    )

    async def until(ok: Any) -> list[Any]:
        """Until Ray's state API lists the run batches running as ``ok`` wants."""
        for _ in range(100_000):
            running = await anyio.to_thread.run_sync(batches)
            if ok(running):
                return running
            await anyio.sleep(0.2)
        raise AssertionError("unreachable")

    def batches() -> list[Any]:
        tasks = list_tasks(
            filters=[("state", "=", "RUNNING")], limit=10_000, raise_on_missing_output=False
        )
        return [t for t in tasks if t.func_or_class_name.endswith("PlacementWorker.run")]

    async def main() -> None:
        waiting = 0
        passed = 0.0
        running: list[Any] = []
        with anyio.CancelScope() as scope:
            async with agent.astream("go") as events:
                async for event in events:
                    if isinstance(event, ToolCallStarted) and event.call.name == "wait_here":
                        waiting += 1
                    if waiting == n and not passed:
                        running = await until(bool)
                        passed = time.time()
                        scope.deadline = anyio.current_time()
        returned = time.time()
        await until(lambda running: not running)
        ended = []
        for batch in running:  # (their records, in detail: when each ended)
            task = await anyio.to_thread.run_sync(get_task, batch.task_id)
            ended.append(task.end_time_ms / 1000)
        print(
            "RESULT "
            + json.dumps(
                {
                    "n": n,
                    "batches": len(ended),
                    "last_batch_ended_s": max(ended) - passed,
                    "median_batch_ended_s": statistics.median(ended) - passed,
                    "parent_returned_s": returned - passed,
                }
            ),
            flush=True,
        )

    anyio.run(main, backend=backend)


# -- the driver ------------------------------------------------------------------------


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):8.3f} [{min(values):.3f}-{max(values):.3f}]"


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _per_child(runs: list[dict[str, Any]], key: str, n: int) -> list[float]:
    return [r[key] / n * 1000 for r in runs]


def scaling(parent_ms: float, worker_ms: float, cores: int, machines: int, n: int) -> str:
    """What the costs per child predict for ``machines`` x ``cores`` (the parent on one core)."""
    workers = cores * machines - 1
    by_parent = 1000 / parent_ms
    by_workers = workers * 1000 / worker_ms
    rate = min(by_parent, by_workers)
    bound = "the parent" if by_parent < by_workers else "the workers"
    return (
        f"  {machines:2d} x {cores} cores: {workers:4d} worker cores, parent places "
        f"{by_parent:8.0f}/s, workers run {by_workers:8.0f}/s -> {rate:7.0f} children/s "
        f"(bound by {bound}); {n:,} children in {n / rate:7.1f} s of CPU-bound work"
    )


def _md_row(loop: str, n: int, way: str, runs: list[dict[str, Any]], base: float) -> str:
    walls = [r["wall"] for r in runs]
    speedup = f"{base / statistics.median(walls):.2f}x" if base else ""

    def cell(key: str) -> str:
        values = _per_child(runs, key, n)
        return f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"

    return (
        f"| {loop}, {n:,} | {way} | {statistics.median(walls):.1f} [{min(walls):.1f}, "
        f"{max(walls):.1f}] | {speedup} | {cell('cpu')} | {cell('worker_cpu')} | "
        f"{cell('ray_cpu')} | {_median(runs, 'peak_rss_mb'):.0f} | "
        f"{_median(runs, 'ray_calls'):.0f} ({_median(runs, 'pulls'):.0f}) |"
    )


def write_markdown(
    path: Path | None,
    results: dict[str, Any],
    args: argparse.Namespace,
    iterations: int,
    table: list[str],
    notes: list[str],
) -> None:
    """Write the figures so far as tables (after each part: a long run keeps what it has)."""
    if path is None:
        return
    info = results["machine"]
    head = (
        f"*Medians of {args.repeats} fresh-process runs, [fastest, slowest] in brackets; "
        f"{info['date'][:10]}, {info['system']}, {info['cpus']} cores (shared), CPython "
        f"{info['python']}, load {os.getloadavg()[0]:.1f} when written; each child "
        f"model turn burns {iterations:,} iterations (~{args.burn_ms:g} ms of CPU).*"
    )
    path.write_text("\n".join([head, "", *table, "", *notes]) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--loops", nargs="+", default=["asyncio"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--burn-ms", type=float, default=5.0)
    parser.add_argument("--big", type=int, default=0, help="W2 (no burn) at N on ray-2")
    parser.add_argument("--deadline", type=int, default=0, help="children for the deadline run")
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    parser.add_argument(
        "--report-window", type=float, help="the placement's report_window (default: its own)"
    )
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--markdown", type=Path, help="write the figures here as tables")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, backend, n, iterations = args.worker
        BURN_ITERATIONS[0] = int(iterations)
        if kind == "deadline":
            deadline_worker(backend, int(n))
        elif kind == "big":
            worker("ray-2", backend, int(n), False, args.report_window)
        else:
            worker(kind, backend, int(n), True, args.report_window)
        return
    window = [] if args.report_window is None else ["--report-window", str(args.report_window)]

    script = Path(__file__)
    iterations = calibrate(args.burn_ms)
    print(f"W11 Ray: W2 (N children x 3 model calls at {LATENCY * 1000:.0f} ms), each child")
    print(f"turn burning {iterations:,} iterations (~{args.burn_ms:g} ms here) of pure Python;")
    print("in process, on 1 and on 2 Ray workers; median [range] of fresh-process runs")
    print(f"load average at start {os.getloadavg()}; critical path {CRITICAL_PATH:.2f} s")
    results: dict[str, Any] = {"machine": machine_info(), "burn": iterations, "runs": []}
    table = [
        "| loop, N | way | wall, s | speed-up | parent CPU, ms/child | workers' CPU, "
        "ms/child | Ray's processes, ms/child | parent peak RSS, MiB | parent's Ray calls "
        "(pulls) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for loop in args.loops:
        for n in args.sizes:
            runs: dict[str, list[dict[str, Any]]] = {w: [] for w in args.ways}
            for _ in range(args.repeats):
                for way in args.ways:  # alternate, so load changes hit each way alike
                    out = run_worker(
                        script, ["--worker", way, loop, str(n), str(iterations), *window]
                    )
                    runs[way].append(out)
                    results["runs"].append({"loop": loop, "n": n, "way": way, **out})
            print(f"{loop}, N={n}:")
            base = _median(runs["local"], "wall") if "local" in runs else 0
            for way in args.ways:
                walls = [r["wall"] for r in runs[way]]
                speedup = f" = {base / statistics.median(walls):4.2f}x local" if base else ""
                print(
                    f"  {way:6} wall {_stats(walls)} s{speedup} | CPU ms/child: parent "
                    f"{_stats(_per_child(runs[way], 'cpu', n))}, workers "
                    f"{_stats(_per_child(runs[way], 'worker_cpu', n))}, Ray "
                    f"{_stats(_per_child(runs[way], 'ray_cpu', n))} | parent peak RSS "
                    f"{_median(runs[way], 'peak_rss_mb'):6.0f} MiB | "
                    f"parent's Ray calls {_median(runs[way], 'ray_calls'):5.0f}"
                    f" ({_median(runs[way], 'pulls'):4.0f} pulls)"
                )
                table.append(_md_row(loop, n, way, runs[way], base))
            if "ray-2" in runs:
                two = runs["ray-2"]
                parent_ms = statistics.median(_per_child(two, "cpu", n))
                worker_ms = statistics.median(
                    (r["worker_cpu"] + r["ray_cpu"]) / n * 1000 for r in two
                )
                head = (
                    f"{loop}, N={n:,}: scaling from ray-2's costs, parent {parent_ms:.3f} "
                    f"ms/child, workers and Ray {worker_ms:.3f} ms/child:"
                )
                print(f"  {head}")
                notes.append(f"- {head}")
                for machines in (1, 10):
                    line = scaling(parent_ms, worker_ms, 16, machines, 100_000)
                    print(line)
                    notes.append(f"    - {line.strip()}")
            write_markdown(args.markdown, results, args, iterations, table, notes)
    if args.big:
        for loop in args.loops:
            out = run_worker(script, ["--worker", "big", loop, str(args.big), "0", *window])
            results["runs"].append({"loop": loop, "n": args.big, "way": "big ray-2", **out})
            line = (
                f"{loop}, W2 (no burn) at N={args.big:,} on ray-2: wall {out['wall']:.1f} s, "
                f"parent CPU {out['cpu'] / args.big * 1000:.3f} ms/child, workers "
                f"{out['worker_cpu'] / args.big * 1000:.3f} ms/child, parent peak RSS "
                f"{out['peak_rss_mb']:.0f} MiB (the run's rise {out['rss_mb']:.0f} MiB)"
            )
            print(line)
            notes.append(f"- {line}")
            write_markdown(args.markdown, results, args, iterations, table, notes)
    if args.deadline:
        for loop in args.loops:
            out = run_worker(script, ["--worker", "deadline", loop, str(args.deadline), "0"])
            results["runs"].append({"loop": loop, "way": "deadline", **out})
            line = (
                f"{loop}, a deadline with {args.deadline} waiting children on ray-2: the last "
                f"batch of children ended {out['last_batch_ended_s'] * 1000:.0f} ms after it "
                f"on its worker, as Ray's state API records it (median "
                f"{out['median_batch_ended_s'] * 1000:.0f} ms, {out['batches']} batches); "
                f"the parent returned after {out['parent_returned_s'] * 1000:.0f} ms"
            )
            print(line)
            notes.append(f"- {line}")
    if args.json:
        write_json(args.json, results)
    write_markdown(args.markdown, results, args, iterations, table, notes)


if __name__ == "__main__":
    main()

"""W2 with a tree-wide budget: the cost of the reservations, beside the same run without.

(The W2 shape, in one process per size; ``bench/w2_fanout.py`` is the full W2
with fresh processes, GC pauses and RSS per subagent.)


One main turn emits N ``task`` calls; each child does 3 model turns (two calls of
a trivial tool, then an answer) at 50 ms simulated latency per model call; one
final main turn. The critical path is 5 x 50 ms. The floor is the same tree as
plain coroutines: pydantic messages, a task group per tool step.

    python bench/w2_budget.py [--sizes 10 100 1000] [--loops asyncio trio] [--budget]

Prints, for the floor and deepactors side by side (each figure the median of
the repeats): wall time over the critical path, CPU ms per subagent, the worst
lateness of a 5 ms timer running beside it, and the process's peak RSS after
the runs. The repeats of the rows alternate (with and without a budget in
swapped order every other repeat), so a drift of the machine's load touches
every row alike.

``--budget`` adds a row for the same run under a tree-wide ``Budget`` that
limits all four resources (so every model call estimates its request and
reserves, and every tool call is counted), set high enough never to refuse,
and prints its CPU beside the run without one: the cost of the reservations,
measured two ways. One after the other: the median of the ratios of each
repeat's two runs, made back to back, each the whole process's CPU. Side by
side: the two runs at once, each on its own event loop in its own thread, each
timed by its thread's CPU; only one thread runs Python at a time, so a change of
the machine's speed during a run (on a shared VM, by up to 40% from one 30 ms
slice to the next) slows both alike, and the ratio's spread is several times
smaller (the collector is off during these runs, whatever ``--no-gc`` says: a
collection would be charged to one run for both). Beside it, the share of the
process's CPU outside the two timed runs shows that no work hides in other threads.
``--no-gc`` holds the cyclic collector off during each measured run (after a
collection): a full collection lands in one run or another by chance and swings
a row's CPU by 20% on this kind of machine, more than the reservations cost; with
it off the ratio is the work itself.
Figures are indicative on a shared machine; compare ratios from one run.
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _common import Measured, measure, peak_rss_mb
from w2_fanout import (
    CRITICAL_PATH,
    LATENCY,
    UNREACHABLE,
    child_turn,
    floor_run,
    lookup,
    main_turn,
)

from deepactors import (
    AssistantMessage,
    Budget,
    create_deep_agent,
)
from deepactors.models import FunctionModel, ModelRequest

# The W2 shape and its floor, shared with bench/w2_fanout.py.


# -- deepactors ------------------------------------------------------------------------


def ours(n: int, budget: Budget | None = None) -> Any:
    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
        "model": FunctionModel(lambda r: child_turn(r.messages), latency=LATENCY),
    }

    def main_answer(request: ModelRequest) -> AssistantMessage:
        return main_turn(n, request.messages)

    # Every child at once, as the floor runs them (the default caps a run at
    # DEFAULT_MAX_CONCURRENT_SUBAGENTS working children).
    agent = create_deep_agent(
        FunctionModel(main_answer, latency=LATENCY),
        tools=[lookup],
        subagents=[child],
        max_concurrent_subagents=None,
    )

    async def run() -> int:
        result = await agent.ainvoke("go", budget=budget)
        if budget is not None:
            assert result["budget"].model_calls == 3 * n + 2, result["budget"]
        return int(result["messages"][-1].text.split()[2])

    return run


def side_by_side(n: int, backend: str) -> tuple[float, float]:
    """One repeat of the two runs at once, each on its own loop in its own thread.

    Returns the ratio of their CPU (each thread's own, ``time.thread_time``) and
    the share of the process's CPU outside the two timed runs (each loop's set-up
    and other threads: none should run in W2, so this checks that no work hides
    there).
    Only one thread runs Python at a time (the GIL hands over every few ms), so a
    change in the machine's speed during the repeat slows both alike. The
    collector is off meanwhile (after a collection): a collection would scan both
    runs' objects and be charged to the thread that happened to trigger it.
    """
    cpu: dict[str, float] = {}
    start = threading.Barrier(2)

    def run_in_thread(name: str, work: Callable[[], Any]) -> None:
        async def timed() -> None:
            start.wait()  # (blocks this loop's thread for an instant; both start together)
            t0 = time.thread_time()
            await work()
            cpu[name] = time.thread_time() - t0

        anyio.run(timed, backend=backend)

    runs = {"without": ours(n), "with": ours(n, UNREACHABLE)}
    threads = [threading.Thread(target=run_in_thread, args=item) for item in runs.items()]
    gc.collect()
    gc.disable()
    try:
        p0 = time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        process = time.process_time() - p0
    finally:
        gc.enable()
    return cpu["with"] / cpu["without"], 1 - (cpu["with"] + cpu["without"]) / process


def quartiles(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 4]:.3f}-{ordered[3 * len(ordered) // 4]:.3f}"


def floor_work(n: int) -> Any:
    return functools.partial(floor_run, n)


def median_of(runs: list[Measured]) -> Measured:
    """Each figure's median over the runs (they vary a lot on a shared 2-core box)."""
    return Measured(
        wall=statistics.median(m.wall for m in runs),
        cpu=statistics.median(m.cpu for m in runs),
        timer_late=statistics.median(m.timer_late for m in runs),
        value=runs[0].value,
    )


def row(name: str, n: int, m: Measured) -> str:
    assert m.value == n, f"{name} returned {m.value} findings, expected {n}"
    return (
        f"  {name:11} wall {m.wall:6.3f} s = {m.wall / CRITICAL_PATH:5.2f}x critical path | "
        f"CPU {m.cpu / n * 1000:6.3f} ms/subagent | timer late {m.timer_late * 1000:7.1f} ms | "
        f"peak RSS {peak_rss_mb():6.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="median of this many runs (default 5; 21 with --budget, whose ratio needs them)",
    )
    parser.add_argument(
        "--budget", action="store_true", help="also run under a Budget and compare the CPU"
    )
    parser.add_argument(
        "--no-gc", action="store_true", help="the collector off during each measured run"
    )
    args = parser.parse_args()
    if args.repeats is None:
        # A paired ratio of a few percent, on a machine whose runs move by up to 20%:
        # five repeats leave its median to chance.
        args.repeats = 21 if args.budget else 5
    print(
        f"W2 fan-out: 3 model turns per child at {LATENCY * 1000:.0f} ms, critical path "
        f"{CRITICAL_PATH * 1000:.0f} ms"
    )
    for backend in args.loops:
        for n in args.sizes:
            print(f"{backend}, N={n}:")
            makers = [
                ("floor", functools.partial(floor_work, n)),
                ("deepactors", functools.partial(ours, n)),
            ]
            if args.budget:
                makers.append(("+budget", functools.partial(ours, n, UNREACHABLE)))
            runs: dict[str, list[Measured]] = {name: [] for name, _ in makers}
            for repeat in range(args.repeats):
                # The two runs compared swap places every other repeat: a run's
                # place in the repeat (after which one, in which heap) weighs
                # on both alike.
                order = makers if repeat % 2 == 0 else [makers[0], *makers[:0:-1]]
                for name, make in order:
                    gc.collect()
                    if args.no_gc:
                        gc.disable()
                    try:
                        runs[name].append(anyio.run(measure, make(), backend=backend))
                    finally:
                        gc.enable()
            medians = {name: median_of(r) for name, r in runs.items()}
            for name, m in medians.items():
                print(row(name, n, m))
            if args.budget:
                # Each repeat runs the two rows back to back: the median of their
                # ratios is steadier than the ratio of the medians when the
                # machine's speed drifts between repeats.
                pairs = zip(runs["+budget"], runs["deepactors"], strict=True)
                ratios = [b.cpu / a.cpu for b, a in pairs]
                print(
                    f"  CPU with a budget / without, one after the other: "
                    f"{statistics.median(ratios):.3f}x (target <= 1.1x); median of "
                    f"{len(ratios)} paired repeats, quartiles {quartiles(ratios)}"
                )
                # The machine's speed also moves within a run (by up to 40% from
                # one 30 ms slice to the next on a shared VM): side by side, both
                # runs see the same machine.
                both = [side_by_side(n, backend) for _ in range(args.repeats)]
                ratios = [ratio for ratio, _ in both]
                other = max(share for _, share in both)
                print(
                    f"  CPU with a budget / without, side by side: "
                    f"{statistics.median(ratios):.3f}x (target <= 1.1x); median of "
                    f"{len(ratios)} repeats, quartiles {quartiles(ratios)}; "
                    f"CPU outside the timed runs (loop set-up, other threads) at most {other:.1%}"
                )


if __name__ == "__main__":
    main()

"""W2: fan-out of N subagents, beside a framework-free floor of the same shape.

One main turn emits N ``task`` calls; each child does 3 model turns (two calls of
a trivial tool, then an answer) at 50 ms simulated latency per model call; one
final main turn. The critical path is 5 x 50 ms. The floor is the same tree as
plain coroutines: pydantic messages, a task group per tool step.

    python bench/w2_fanout.py [--sizes 100 1000 3000 10000] [--loops asyncio trio]
                              [--repeats 3] [--census] [--sdk] [--freeze] [--defer-gc]
                              [--json PATH]

Every run is a fresh interpreter (after a small warm-up run in it), so runs do
not inherit each other's heap, collector generations or peak RSS; the floor's
and deepactors' runs alternate, so a change in the machine's load hits both.
Printed per (loop, N), each figure the median of the repeats:

- wall time over the critical path, and deepactors' wall over the floor's;
- CPU ms per subagent: the whole process (``time.process_time``, every thread);
- GC: total time in CPython's cyclic collector, its longest single pause (wall,
  and in thread CPU time, which load on the machine cannot inflate) and how
  many full (generation 2) collections ran;
- the worst lateness of a 5 ms timer running in the same loop beside the run;
- RSS per subagent: the run's peak RSS above where it started, over N.

``--census`` adds, from one more run per (loop, N), GC-tracked objects per
subagent: how many the largest full collection walked (garbage cycles waiting
for it included), and how many are alive when the N-th child model call is
made (all children are alive then; counted after a collection). The figures
the collector's pauses grow with, independent of the machine's load.
``--sdk`` imports the Anthropic SDK first, so the heap is that of a process
talking to a real model (~120,000 more objects for every full collection);
``--freeze`` then does what ``open_runtime(freeze_heap=True)`` does when a
server starts (``gc.collect(); gc.freeze()``), in the floor's runs too.

``--defer-gc`` adds a row: deepactors under ``open_runtime(defer_gc=True)``,
which defers the collector's full collections while runs are in progress.
``--traced`` adds two rows: deepactors traced with OpenTelemetry (the SDK's batch
span processor and an in-memory exporter; every span exported inside the timing),
and traced through the OpenTelemetry API's no-op tracer provider (``trace_noop``:
deepactors' own share of tracing, its events and the tracer's bookkeeping,
without the SDK's spans); each beside deepactors untraced.
With ``--traced``, a third row: the floor traced by hand (``floor_traced``: the
same spans made through the SDK directly, see ``_traced_floor.py``), beside the
floor: what tracing this work costs with no framework in between.
``--unpaced`` adds a row: deepactors under ``open_runtime(pacing=None)``, without
the slices that keep the loop's timers and sockets served during the fan-out
(what pacing costs, and what it buys in timer lateness).

``--json PATH`` also writes every run's figures (not only the medians) with the
machine, date and load, for ``bench/plots.py``.

Wall-clock figures on a shared machine are indicative; CPU, GC CPU pauses and
object counts are the robust ones.
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _common import emit_result, machine_info, measure, run_worker, write_json

from deepactors import (
    AssistantMessage,
    Budget,
    ToolCall,
    ToolMessage,
    UserMessage,
    create_deep_agent,
    open_runtime,
)
from deepactors.messages import Message
from deepactors.models import FunctionModel, ModelRequest

LATENCY = 0.05
CRITICAL_PATH = 5 * LATENCY
IMPLS = ("floor", "deepactors")


class Census:
    """Counts GC-tracked objects: what the collector walks when it pauses longest.

    ``walked`` is the largest number of objects any full collection of the run
    started with (garbage cycles waiting for it included), less the objects
    alive before the run. ``live`` is the objects alive after a collection made
    when the N-th child model call is made (all children are alive then).
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0
        self.base = 0
        self.walked = 0
        self.live: int | None = None
        self._own = False  # our own collection below is not one of the run's

    def start(self) -> None:
        gc.collect()
        self.base = len(gc.get_objects())
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2 and not self._own:
            self.walked = max(self.walked, len(gc.get_objects()) - self.base)

    def tick(self) -> None:
        self.calls += 1
        if self.calls == self.n and self.live is None:
            self._own = True
            gc.collect()
            self._own = False
            self.live = len(gc.get_objects()) - self.base


CENSUS: Census | None = None


async def lookup(key: str) -> str:
    """Look a key up (trivially).

    Args:
        key: The key.
    """
    return f"value of {key}"


def child_turn(messages: list[Message] | Any) -> AssistantMessage:
    if CENSUS is not None:
        CENSUS.tick()
    done = sum(1 for m in messages if isinstance(m, ToolMessage))
    if done < 2:
        return AssistantMessage(tool_calls=[ToolCall(name="lookup", args={"key": f"k{done}"})])
    return AssistantMessage(content=f"finding for {messages[0].text}")


_FANOUTS: dict[int, AssistantMessage] = {}


def fanout_answer(n: int) -> AssistantMessage:
    """The main agent's first answer, ``n`` task calls: built once, before the run.

    Building 100,000 tool calls is the model's work (0.6-1.1 s in one synchronous
    step), not the framework's: the runs under measurement reuse the one made
    when their work was made (:func:`floor_work`, :func:`our_work`).
    """
    found = _FANOUTS.get(n)
    if found is None:
        found = _FANOUTS[n] = AssistantMessage(
            tool_calls=[
                ToolCall(name="task", args={"description": f"topic {i}", "subagent_type": "r"})
                for i in range(n)
            ]
        )
    return found


def main_turn(n: int, messages: list[Message] | Any) -> AssistantMessage:
    if len(messages) == 1:
        if messages[0].text != "go":
            # A summary of the context asked for by the default stack's
            # summarization (deepactors past ~170,000 tokens of results).
            return AssistantMessage(content="the findings so far")
        return fanout_answer(n)
    return AssistantMessage(content=f"report from {len(messages) - 2} findings")


# -- the floor: plain coroutines -------------------------------------------------------


async def floor_agent(messages: list[Message], turn: Any, tools: dict[str, Any]) -> str:
    while True:
        await anyio.sleep(LATENCY)
        msg = turn(messages)
        messages.append(msg)
        if not msg.tool_calls:
            return msg.text
        results: list[ToolMessage | None] = [None] * len(msg.tool_calls)

        async def run(i: int, call: ToolCall, out: list[ToolMessage | None]) -> None:
            text = await tools[call.name](**call.args)
            out[i] = ToolMessage(tool_call_id=call.id, name=call.name, content=text)

        async with anyio.create_task_group() as tg:
            for i, call in enumerate(msg.tool_calls):
                tg.start_soon(run, i, call, results)
        messages.extend(r for r in results if r is not None)


async def floor_run(n: int) -> int:
    async def task(description: str, subagent_type: str) -> str:
        return await floor_agent([UserMessage(content=description)], child_turn, {"lookup": lookup})

    answer = await floor_agent(
        [UserMessage(content="go")], lambda m: main_turn(n, m), {"task": task}
    )
    return int(answer.split()[2])


def floor_work(n: int) -> Callable[[], Awaitable[int]]:
    fanout_answer(n)
    return functools.partial(floor_run, n)


def floor_traced_work(n: int) -> Callable[[], Awaitable[int]]:
    """The floor, making deepactors' spans of W2 through the SDK by hand."""
    from _traced_floor import traced_floor_run

    fanout_answer(n)

    async def run() -> int:
        provider = _traced_provider()
        tracer = provider.get_tracer("w2-floor")
        found = await traced_floor_run(n, tracer, main_turn, child_turn, lookup, LATENCY)
        provider.force_flush()  # every span exported, inside the timing
        return found

    return run


# -- deepactors ------------------------------------------------------------------------


# Limits every resource (so all of the budget's accounting runs) and never refuses.
UNREACHABLE = Budget(model_calls=10**9, input_tokens=10**12, output_tokens=10**12, tool_calls=10**9)


def our_work(
    n: int,
    defer_gc: bool = False,
    paced: bool = True,
    budget: Budget | None = None,
    traced: bool = False,
    noop_traced: bool = False,
) -> Callable[[], Awaitable[int]]:
    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
        "model": FunctionModel(lambda r: child_turn(r.messages), latency=LATENCY),
    }

    def main_answer(request: ModelRequest) -> AssistantMessage:
        return main_turn(n, request.messages)

    fanout_answer(n)

    # Every child at once, as the floor runs them (the default caps a run at
    # DEFAULT_MAX_CONCURRENT_SUBAGENTS working children).
    agent = create_deep_agent(
        FunctionModel(main_answer, latency=LATENCY),
        tools=[lookup],
        subagents=[child],
        max_concurrent_subagents=None,
    )

    async def run() -> int:
        if traced:
            from deepactors.tracing import Tracing

            tracing = Tracing(tracer_provider=_traced_provider())
            async with open_runtime(tracing=tracing) as rt:
                result = await agent.ainvoke("go", runtime=rt)
            _traced_provider().force_flush()  # every span exported, inside the timing
        elif noop_traced:
            from opentelemetry.trace import NoOpTracerProvider

            from deepactors.tracing import Tracing

            async with open_runtime(tracing=Tracing(tracer_provider=NoOpTracerProvider())) as rt:
                result = await agent.ainvoke("go", runtime=rt)
        elif defer_gc or not paced:
            async with open_runtime(defer_gc=defer_gc, pacing=0.005 if paced else None) as rt:
                result = await agent.ainvoke("go", runtime=rt)
        else:
            result = await agent.ainvoke("go", budget=budget)
        return int(result["messages"][-1].text.split()[2])

    return run


_PROVIDER: Any = None


def _traced_provider() -> Any:
    """The OpenTelemetry SDK with its batch span processor and an in-memory exporter."""
    global _PROVIDER
    if _PROVIDER is None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        _PROVIDER = TracerProvider()
        _PROVIDER.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    return _PROVIDER


MAKERS = {
    "floor": floor_work,
    "deepactors": our_work,
    "defer_gc": functools.partial(our_work, defer_gc=True),
    "unpaced": functools.partial(our_work, paced=False),
    "floor_traced": floor_traced_work,
    "traced": functools.partial(our_work, traced=True),
    "trace_noop": functools.partial(our_work, noop_traced=True),
    # For bench/instructions.py w2 --budget (bench/w2_budget.py times it).
    "budget": functools.partial(our_work, budget=UNREACHABLE),
}


# -- one run in a fresh process --------------------------------------------------------


def worker(impl: str, backend: str, n: int, mode: str, sdk: bool, freeze: bool) -> None:
    global CENSUS
    if sdk:
        # The heap of a process that talks to a real model: the SDK's modules.
        import anthropic  # noqa: F401
    make = MAKERS[impl]
    anyio.run(make(10), backend=backend)  # warm-up: imports, first-call caches
    work = make(n)
    if freeze:
        # What open_runtime(freeze_heap=True) does when a server starts.
        gc.collect()
        gc.freeze()
    if mode == "plain":  # just the run, for an instruction counter (bench/instructions.py)
        value = anyio.run(work, backend=backend)
        assert value == n, f"{impl} returned {value} findings, expected {n}"
        return
    if mode == "census":
        CENSUS = Census(n)
        CENSUS.start()
        value = anyio.run(work, backend=backend)
        CENSUS.stop()
        assert value == n, f"{impl} returned {value} findings, expected {n}"
        print(f'RESULT {{"walked": {CENSUS.walked}, "live": {CENSUS.live}}}', flush=True)
        return
    gc.collect()
    m = anyio.run(measure, work, backend=backend)
    assert m.value == n, f"{impl} returned {m.value} findings, expected {n}"
    emit_result(m)


# -- the driver ------------------------------------------------------------------------


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _range(runs: list[dict[str, Any]], key: str, scale: float = 1.0, fmt: str = ".0f") -> str:
    """The lowest and highest of a figure over the runs: ``lo..hi``."""
    values = sorted(r.get(key, 0.0) * scale for r in runs)
    return f"{values[0]:{fmt}}..{values[-1]:{fmt}}"


def _row(impl: str, n: int, runs: list[dict[str, Any]], objects: dict[str, int] | None) -> str:
    wall = _median(runs, "wall")
    per_obj = ""
    if objects is not None:
        per_obj = (
            f" | GC objects/sub: {objects['walked'] / n:3.0f} walked by the largest "
            f"full collection, {objects['live'] / n:3.0f} live"
        )
    late_cpu = statistics.median(r.get("timer_late_cpu", 0.0) for r in runs)
    return (
        f"  {impl:10} wall {wall:6.3f} s ({_range(runs, 'wall', fmt='.2f')}) = "
        f"{wall / CRITICAL_PATH:5.2f}x path | "
        f"CPU {_median(runs, 'cpu') / n * 1000:6.3f} ms/sub | "
        f"GC {_median(runs, 'gc_time') * 1000:6.0f} ms, longest "
        f"{_median(runs, 'gc_longest') * 1000:5.1f} ms "
        f"({_median(runs, 'gc_longest_cpu') * 1000:5.1f} CPU), "
        f"{_median(runs, 'gc_full'):3.0f} full | "
        f"timer late {_median(runs, 'timer_late') * 1000:6.1f} ms "
        f"({_range(runs, 'timer_late', 1000)}; loop CPU {late_cpu * 1000:.1f}, "
        f"{_range(runs, 'timer_late_cpu', 1000)}) | "
        f"RSS {_median(runs, 'rss_mb') * 1024 / n:6.1f} KiB/sub, "
        f"peak +{_median(runs, 'rss_mb'):.0f} MB ({_range(runs, 'rss_mb')}){per_obj}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 3000, 10000])
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--repeats", type=int, default=3, help="median of this many runs")
    parser.add_argument("--census", action="store_true", help="count GC objects per subagent")
    parser.add_argument(
        "--sdk", action="store_true", help="import the anthropic SDK first (a real app's heap)"
    )
    parser.add_argument(
        "--freeze", action="store_true", help="gc.freeze() before the run (open_runtime's knob)"
    )
    parser.add_argument(
        "--defer-gc",
        action="store_true",
        help="also run deepactors under open_runtime(defer_gc=True)",
    )
    parser.add_argument(
        "--unpaced", action="store_true", help="also run deepactors with pacing=None"
    )
    parser.add_argument(
        "--traced",
        action="store_true",
        help="also run deepactors traced (OpenTelemetry SDK, batch processor, in-memory)",
    )
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--worker", nargs=3, metavar=("IMPL", "LOOP", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        impl, backend, n = args.worker
        worker(impl, backend, int(n), args.mode, args.sdk, args.freeze)
        return
    flags = [*(["--sdk"] if args.sdk else []), *(["--freeze"] if args.freeze else [])]
    script = Path(__file__)
    print(
        f"W2 fan-out: 3 model turns per child at {LATENCY * 1000:.0f} ms, critical path "
        f"{CRITICAL_PATH * 1000:.0f} ms; medians of {args.repeats} fresh-process runs"
        + (f" ({' '.join(flags)})" if flags else "")
    )
    impls = (
        *IMPLS,
        *(("defer_gc",) if args.defer_gc else ()),
        *(("unpaced",) if args.unpaced else ()),
        *(("traced", "trace_noop", "floor_traced") if args.traced else ()),
    )
    results: list[dict[str, Any]] = []
    for backend in args.loops:
        for n in args.sizes:
            runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
            for _ in range(args.repeats):
                for impl in impls:  # alternate, so load changes hit both alike
                    worker_args = ["--worker", impl, backend, str(n), *flags]
                    runs[impl].append(run_worker(script, worker_args))
            objects: dict[str, dict[str, int] | None] = dict.fromkeys(impls)
            if args.census:
                for impl in impls:
                    census_args = ["--worker", impl, backend, str(n), *flags, "--mode", "census"]
                    out = run_worker(script, census_args)
                    objects[impl] = out
            for impl in impls:
                results.append(
                    {
                        "loop": backend,
                        "n": n,
                        "impl": impl,
                        "runs": runs[impl],
                        "census": objects[impl],
                    }
                )
            print(f"{backend}, N={n}:")
            for impl in impls:
                print(_row(impl, n, runs[impl], objects[impl]))
            for impl in (i for i in impls[1:] if i != "floor_traced"):
                ratio = _median(runs[impl], "wall") / _median(runs["floor"], "wall")
                cpu_ratio = _median(runs[impl], "cpu") / _median(runs["floor"], "cpu")
                print(f"  {impl} / floor: wall {ratio:.2f}x, CPU {cpu_ratio:.2f}x")
            if "floor_traced" in runs:
                # What tracing costs the floor itself, through the SDK alone;
                # deepactors' traced row beside it says what is ours.
                hand, floor = runs["floor_traced"], runs["floor"]
                ratio = _median(hand, "cpu") / _median(floor, "cpu")
                bare = _median_of(hand, _cpu_ex_gc) / _median_of(floor, _cpu_ex_gc)
                print(
                    f"  floor_traced / floor: CPU {ratio:.2f}x, without GC {bare:.2f}x; "
                    f"tracing added {_added(hand, floor, n)} ms/sub to the floor, "
                    f"{_added(runs['traced'], runs['deepactors'], n)} to deepactors"
                )
            for impl in (i for i in impls[2:] if i != "floor_traced"):
                ours = runs["deepactors"]
                ratio = _median(runs[impl], "cpu") / _median(ours, "cpu")
                # Whether a full collection falls inside a run is a threshold
                # effect worth ~80 ms at N=1,000: the ratio without the collector too.
                bare = _median_of(runs[impl], _cpu_ex_gc) / _median_of(ours, _cpu_ex_gc)
                print(
                    f"  {impl} / deepactors: CPU {ratio:.2f}x, without GC {bare:.2f}x "
                    f"(runs {_spread(runs[impl], n)} ms/sub; deepactors {_spread(ours, n)})"
                )
    if args.json:
        meta = {"benchmark": "w2", "critical_path": CRITICAL_PATH, "repeats": args.repeats}
        write_json(args.json, {**machine_info(), **meta, "flags": flags, "results": results})


def _cpu_ex_gc(run: dict[str, Any]) -> float:
    return float(run["cpu"] - run["gc_time"])


def _median_of(runs: list[dict[str, Any]], figure: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(figure(r) for r in runs)


def _added(traced: list[dict[str, Any]], untraced: list[dict[str, Any]], n: int) -> str:
    """The median CPU per subagent of ``traced`` less that of ``untraced``, in ms."""
    return f"{(_median(traced, 'cpu') - _median(untraced, 'cpu')) / n * 1000:.3f}"


def _spread(runs: list[dict[str, Any]], n: int) -> str:
    """The lowest and highest CPU per subagent of the runs, in ms."""
    cpus = sorted(r["cpu"] / n * 1000 for r in runs)
    return f"{cpus[0]:.3f}..{cpus[-1]:.3f}"


if __name__ == "__main__":
    main()

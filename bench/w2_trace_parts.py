"""Where W2's tracing cost goes: the tracer's own work, the SDK's spans, and the rest.

``w2_fanout.py --traced`` measures what tracing adds to a whole run. This splits
it: a W2 run's events (N subagents, no latency) are recorded once, then fed,
in the same process, straight into deepactors' tracer, with

- the OpenTelemetry API's no-op provider: the tracer's own work (its handlers,
  the attribute dictionaries, making a tool call's span current), no span made;
- the SDK with its batch span processor and an in-memory exporter: that and
  the SDK's spans, every one exported inside the timing;

and, beside them, the same run untraced and traced, as whole runs with the
collector on (what ``w2_fanout.py`` measures). What the whole traced run adds
beyond the two replays is what live spans cost the run around them: a larger
heap for the cyclic collector to walk, and the caches the spans share with it.

    python bench/w2_trace_parts.py [--n 1000] [--repeats 5] [--loop asyncio|trio] [--no-gc]

With ``--no-gc`` the cyclic collector is off while each is timed: the
difference from a run with it on is what the collector's walks cost, which the
SDK's live spans (kept by the exporter, or queued for it) make more of.

Each figure is the median over the repeats of CPU per subagent (this thread's;
the batch processor's thread does little), alternating the four.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from w2_fanout import child_turn, lookup, main_turn

from deepactors import create_deep_agent, open_runtime
from deepactors.events import Event
from deepactors.models import FunctionModel
from deepactors.tracing import Tracing


class _Recorder:
    """A structural-only listener that keeps every event (what a tracer is sent)."""

    structural_only = True

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)


def _agent(n: int) -> Any:
    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
        "model": FunctionModel(lambda r: child_turn(r.messages)),
    }
    return create_deep_agent(
        FunctionModel(lambda r: main_turn(n, r.messages)),
        tools=[lookup],
        subagents=[child],
        max_concurrent_subagents=None,
    )


def _sdk() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    return provider


async def _run(n: int, provider: Any, listener: Any = None) -> None:
    tracing = None if provider is None else Tracing(tracer_provider=provider)
    async with open_runtime(tracing=tracing) as rt:
        handle = await rt.thread(_agent(n)).start("go", on_event=listener)
        await handle.result()
    _flush(provider)


def _flush(provider: Any) -> None:
    flush = getattr(provider, "force_flush", None)  # the SDK's; the API's no-op has none
    if flush is not None:
        flush()


def _replay(events: list[Event], provider: Any) -> None:
    from deepactors.tracing._tree import TreeTracer

    tracer = TreeTracer(provider, capture_content=False, thread_id=None)
    for event in events:
        tracer(event)
    _flush(provider)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loop", default="asyncio")
    parser.add_argument(
        "--no-gc", action="store_true", help="the collector off while timing (its share)"
    )
    args = parser.parse_args()
    from opentelemetry.trace import NoOpTracerProvider

    n, loop = args.n, args.loop
    recorder = _Recorder()
    anyio.run(_run, 10, None, backend=loop)  # warm-up: imports, first-call caches
    anyio.run(_run, n, None, recorder, backend=loop)
    events = recorder.events

    def timed(work: Any, provider: Any = None) -> float:
        gc.collect()
        if args.no_gc:
            gc.disable()
        start = time.thread_time()
        work(provider)
        spent = (time.thread_time() - start) / n * 1e3
        gc.enable()
        if provider is not None and hasattr(provider, "shutdown"):
            provider.shutdown()  # its thread and its spans gone before the next run
        return spent

    def whole(provider: Any) -> None:
        anyio.run(_run, n, provider, backend=loop)

    def replayed(provider: Any) -> None:
        _replay(events, provider)

    parts: dict[str, list[float]] = {k: [] for k in ("untraced", "traced", "noop", "sdk")}
    for _ in range(args.repeats):
        parts["untraced"].append(timed(whole))
        parts["traced"].append(timed(whole, _sdk()))
        parts["noop"].append(timed(replayed, NoOpTracerProvider()))
        parts["sdk"].append(timed(replayed, _sdk()))
    med = {k: statistics.median(v) for k, v in parts.items()}
    added = med["traced"] - med["untraced"]
    print(
        f"W2 tracing's parts, {loop}, N={n}, {len(events)} events, "
        f"medians of {args.repeats} (CPU ms per subagent, this thread"
        f"{', collector off' if args.no_gc else ''})"
    )
    print(f"  whole run untraced  {med['untraced']:.3f}")
    print(f"  whole run traced    {med['traced']:.3f}  (adds {added:.3f})")
    print(f"  replay, no-op       {med['noop']:.3f}  (the tracer's own work)")
    print(
        f"  replay, SDK         {med['sdk']:.3f}  (the SDK's spans: {med['sdk'] - med['noop']:.3f})"
    )
    print(
        f"  the rest            {added - med['sdk']:.3f}  (events made and sent, and "
        f"what live spans cost the run around them)"
    )


if __name__ == "__main__":
    main()

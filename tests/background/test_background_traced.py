"""Background tasks in traces: their spans nest under the call that started them,
also when they end after the run that started them did (the SDK's in-memory exporter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from deepactors.actors import open_runtime
from deepactors.tracing import Tracing
from tests.background.test_background_tasks import TOPICS, Gates, build
from tests.waiting import wait_until

pytestmark = pytest.mark.anyio


def named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_a_detached_tasks_spans_nest_under_its_start_call(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gates = Gates()
    agent = build(gates, tmp_path)
    async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
        thread = rt.thread(agent, "t")
        await (await thread.start({"messages": "research"})).result()
        # The run is over and its root span ended; the tasks still work.
        roots = named(exporter.get_finished_spans(), "invoke_agent main")
        assert len(roots) == 1
        assert not named(exporter.get_finished_spans(), "invoke_agent researcher")
        # Another run of the thread meanwhile: its trace is its own.
        await (await thread.start({"messages": "how is it going?"})).result()
        gates.open(*TOPICS)

        async def ended() -> bool:
            values = (await thread.state()).values
            return {t["status"] for t in values["async_tasks"].values()} == {"success"}

        await wait_until(ended)
        # A task's span ends just after its outcome is folded in.
        await wait_until(
            lambda: len(named(exporter.get_finished_spans(), "invoke_agent researcher")) == 5,
            what="five task spans ended",
            timeout=10,
        )
    spans = exporter.get_finished_spans()
    first, second = sorted(named(spans, "invoke_agent main"), key=lambda s: s.start_time or 0)
    starts = {
        s.context.span_id: s
        for s in named(spans, "execute_tool start_async_task")
        if s.context.trace_id == first.context.trace_id
    }
    assert len(starts) == 5
    children = named(spans, "invoke_agent researcher")
    assert len(children) == 5
    for child in children:
        assert child.context.trace_id == first.context.trace_id
        assert child.parent is not None
        assert child.parent.span_id in starts
        assert child.status.status_code != StatusCode.ERROR
        calls = [
            s
            for s in named(spans, "chat ")
            if s.parent and s.parent.span_id == child.context.span_id
        ]
        assert len(calls) == 2  # its two model turns, traced after the run ended
    assert all(s.context.trace_id != second.context.trace_id for s in children)

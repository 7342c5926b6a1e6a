"""Spans of children on Ray workers join the parent's trace: the parent's tracer
makes them from the events the children send back, and the trace context goes
with each child, so what runs on its worker (a tool, an SDK) continues the trace."""

from __future__ import annotations

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deepactors import open_runtime
from deepactors.placement import RayPlacement
from deepactors.tracing import Tracing
from tests.placement.agents import answers, parent, say


async def test_placed_childrens_spans_join_the_parents_trace(placement: RayPlacement) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = parent(placement)
    with anyio.fail_after(60):
        async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
            result = await agent.ainvoke(say([("w", "trace"), ("w", "echo hi")]), runtime=rt)
    spans = exporter.get_finished_spans()
    [root] = [s for s in spans if s.name == "invoke_agent main"]
    trace_id = root.context.trace_id
    assert {s.context.trace_id for s in spans} == {trace_id}
    by_id = {s.context.span_id: s for s in spans}
    children = [s for s in spans if s.name == "invoke_agent w"]
    assert len(children) == 2
    for child in children:
        # Under the `task` call that started it, with its model calls under it.
        assert child.parent is not None
        assert by_id[child.parent.span_id].name == "execute_tool task"
        chats = [s for s in spans if s.parent and s.parent.span_id == child.context.span_id]
        assert any(s.name.startswith("chat") for s in chats)
    # The tool on the worker ran inside the parent's trace.
    (status, seen), _ = answers(result)
    assert status == "success"
    assert seen == f"{trace_id:032x}"

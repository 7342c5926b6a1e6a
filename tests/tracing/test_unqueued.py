"""A traced run that is refused or given up before it is queued leaves no span open."""

from __future__ import annotations

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from deepactors import AssistantMessage, create_deep_agent, open_runtime
from deepactors.actors._actor import MAILBOX_SIZE
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.tracing import Tracing

pytestmark = pytest.mark.anyio


async def test_a_full_mailbox_starts_no_trace_and_a_given_up_start_ends_its_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    release = anyio.Event()

    async def hold(request: ModelRequest) -> AssistantMessage:
        await release.wait()
        return AssistantMessage(content="done")

    agent = create_deep_agent(FunctionModel(hold), checkpointer=MemoryCheckpointer())
    async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
        thread = rt.thread(agent, "t")
        handles = [await thread.start("first")]
        await anyio.wait_all_tasks_blocked()  # the first run waits in its model call
        handles += [thread.start_nowait(f"queued {i}") for i in range(MAILBOX_SIZE)]
        with pytest.raises(anyio.WouldBlock):
            thread.start_nowait("one too many")
        with anyio.move_on_after(0.05) as waited:
            await thread.start("given up")  # waits for room, then its caller gives up
        assert waited.cancelled_caught
        release.set()
        for handle in handles:
            await handle.wait()
    provider.force_flush()
    roots = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    ran = [s for s in roots if s.status.status_code is not StatusCode.ERROR]
    unqueued = [s for s in roots if s.status.status_code is StatusCode.ERROR]
    # One span per run that ran; none for the run refused at once (a caller
    # that orders it again starts a trace then); the one given up ended, saying so.
    assert len(ran) == MAILBOX_SIZE + 1
    assert len(unqueued) == 1
    assert (unqueued[0].status.description or "").startswith("never queued")
    assert unqueued[0].attributes is not None
    assert unqueued[0].attributes["deepactors.outcome"] == "cancelled"

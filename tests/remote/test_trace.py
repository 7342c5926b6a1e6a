"""A remote child's run request carries the trace context of the ``task`` call that made
it (``traceparent``), so the remote run joins the parent's trace; both loops."""

from __future__ import annotations

import json
import re

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deepactors import create_deep_agent
from deepactors.actors import open_runtime
from deepactors.events import Event, ModelCallFinished
from deepactors.models import FunctionModel
from deepactors.tracing import Tracing

from .conftest import answers, parent_model, remote, say
from .test_bad_servers import INFO, _http, serving

VALUES = {"messages": [{"type": "ai", "content": "traced answer"}]}
TRACEPARENT = re.compile(
    rb"\r\ntraceparent: 00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\r\n", re.I
)


async def test_the_run_request_carries_the_task_calls_traceparent() -> None:
    heads: list[bytes] = []

    def answer(head: bytes) -> bytes:
        heads.append(head)
        if head.startswith(b"GET /info"):
            return _http("200 OK", "application/json", INFO)
        if head.startswith(b"POST "):  # the run (tracing listens: streamed), at once ended
            meta = json.dumps({"run_id": "run-1"})
            return _http(
                "200 OK", "text/event-stream", f"event: metadata\ndata: {meta}\n\n".encode()
            )
        if b"/state " in head.split(b"\r\n")[0]:
            return _http("200 OK", "application/json", json.dumps({"values": VALUES}).encode())
        return _http("200 OK", "application/json", b'{"status": "success", "metadata": {}}')

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with serving(answer) as url:
        agent = create_deep_agent(FunctionModel(parent_model), subagents=[remote("r", url)])
        async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
            result = await agent.ainvoke(say([("r", "echo x")]), runtime=rt)
    assert answers(result) == [("success", "traced answer")]
    [run_request] = [h for h in heads if h.startswith(b"POST ")]
    found = TRACEPARENT.search(run_request)
    assert found is not None, run_request
    trace_id, span_id = found.group(1).decode(), found.group(2).decode()
    tool_spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool task"]
    [span] = tool_spans
    assert f"{span.context.trace_id:032x}" == trace_id
    assert f"{span.context.span_id:016x}" == span_id


async def test_a_remote_childs_relayed_calls_make_no_second_span(server: str) -> None:
    # Its server traces its calls under the traceparent it was sent; here the
    # child is one span (where its run is, as attributes), not a copy of them.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = create_deep_agent(FunctionModel(parent_model), subagents=[remote("r", server)])
    seen: list[Event] = []
    async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
        handle = await rt.thread(agent).start(say([("r", "write /a.md x")]), on_event=seen.append)
        result = await handle.result()
    assert answers(result)[0][0] == "success"
    relayed = [e for e in seen if isinstance(e, ModelCallFinished) and e.path.startswith("main/")]
    assert relayed  # the events did come back (someone listened)
    spans = exporter.get_finished_spans()
    [child] = [s for s in spans if s.name == "invoke_agent r"]
    assert child.attributes is not None
    assert child.attributes["deepactors.remote.url"] == server
    under_child = [s for s in spans if s.parent and s.parent.span_id == child.context.span_id]
    assert under_child == []
    assert [s.name for s in spans if s.name.startswith("chat ")] == ["chat function-model"] * 2

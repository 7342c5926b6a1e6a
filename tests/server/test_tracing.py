"""A request's W3C ``traceparent`` makes its run part of the caller's trace."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deepactors.server import create_app
from deepactors.tracing import Tracing

from .agents import Probe, fan_out_agent
from .conftest import Served

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def test_a_run_joins_the_trace_of_its_request(serve: Callable[..., Served]) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    probe = Probe()
    probe.seen.set()  # nobody watches the stream: the subagents need not wait
    app = create_app({"main": fan_out_agent(probe)}, tracing=Tracing(tracer_provider=provider))
    served = serve(app)
    body = {"assistant_id": "main", "input": {"messages": [{"role": "user", "content": "go"}]}}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        traced = http.post(
            "/runs/wait", json=body, headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        )
        assert traced.status_code == 200, traced.text
        plain = http.post("/runs/wait", json=body)
        assert plain.status_code == 200, plain.text
    provider.force_flush()
    finished = spans.get_finished_spans()
    roots = [s for s in finished if s.name == "invoke_agent main"]
    assert len(roots) == 2
    joined = [s for s in roots if f"{s.context.trace_id:032x}" == TRACE_ID]
    assert len(joined) == 1
    (root,) = joined
    assert root.parent is not None
    assert f"{root.parent.span_id:016x}" == PARENT_ID
    assert root.parent.is_remote
    # The whole tree in that trace: both researchers, under their task calls.
    in_trace = [s for s in finished if f"{s.context.trace_id:032x}" == TRACE_ID]
    assert len([s for s in in_trace if s.name == "invoke_agent researcher"]) == 2
    # The request without one started a trace of its own.
    (other,) = [s for s in roots if s is not root]
    assert other.parent is None

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


def test_a_runs_metadata_names_its_trace(serve: Callable[..., Served]) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    probe = Probe()
    probe.seen.set()
    app = create_app({"main": fan_out_agent(probe)}, tracing=Tracing(tracer_provider=provider))
    served = serve(app)
    body = {"assistant_id": "main", "input": {"messages": [{"role": "user", "content": "go"}]}}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        created = http.post(
            f"/threads/{thread_id}/runs",
            json=body,
            headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
        )
        assert created.status_code == 200, created.text
        run_id = created.json()["run_id"]
        # Known as soon as the run is created: a UI links to a run still going.
        assert created.json()["metadata"]["trace_id"] == TRACE_ID
        joined = http.get(f"/threads/{thread_id}/runs/{run_id}/join")
        assert joined.status_code == 200, joined.text
        run = http.get(f"/threads/{thread_id}/runs/{run_id}").json()
        own = http.post(f"/threads/{thread_id}/runs/wait", json=body)  # no traceparent
        assert own.status_code == 200, own.text
        runs = http.get(f"/threads/{thread_id}/runs").json()
    provider.force_flush()
    assert run["status"] == "success"
    metadata = run["metadata"]
    (root,) = [
        s
        for s in spans.get_finished_spans()
        if s.name == "invoke_agent main" and f"{s.context.trace_id:032x}" == TRACE_ID
    ]
    span_id = f"{root.context.span_id:016x}"
    assert metadata["trace_id"] == TRACE_ID
    assert metadata["traceparent"] == f"00-{TRACE_ID}-{span_id}-{int(root.context.trace_flags):02x}"
    # A run with no caller's trace has a trace of its own, named all the same.
    (other,) = [r for r in runs if r["run_id"] != run_id]
    own_trace = other["metadata"]["trace_id"]
    assert own_trace != TRACE_ID
    assert any(f"{s.context.trace_id:032x}" == own_trace for s in spans.get_finished_spans())


def test_untraced_runs_have_no_trace_in_their_metadata(serve: Callable[..., Served]) -> None:
    probe = Probe()
    probe.seen.set()
    served = serve(create_app({"main": fan_out_agent(probe)}, tracing=False))
    body = {"assistant_id": "main", "input": {"messages": [{"role": "user", "content": "go"}]}}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        created = http.post(f"/threads/{thread_id}/runs", json=body).json()
        http.get(f"/threads/{thread_id}/runs/{created['run_id']}/join")
        run = http.get(f"/threads/{thread_id}/runs/{created['run_id']}").json()
    assert "trace_id" not in run["metadata"]

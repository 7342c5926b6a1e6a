"""A tool call's span is current while the tool runs, and travels on with what it calls.

Inside a tool, user code's own spans nest under the call's ``execute_tool`` span
and ``outgoing_headers()`` gives its ``traceparent``; an MCP server over HTTP is
sent it with every request (a real server that writes down the headers it got).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deepactors import (
    AssistantMessage,
    Command,
    ToolCall,
    ToolMessage,
    create_deep_agent,
    open_runtime,
)
from deepactors.mcp import MCPServer
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.tracing import Tracing, outgoing_headers
from tests.mcp.servers import SDK_HTTP_ON_TRIO, free_port
from tests.waiting import port_open, wait_until_serving

pytestmark = pytest.mark.anyio

APP = Path(__file__).with_name("traced_mcp_app.py")


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def calls_then_done(*calls: ToolCall) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=list(calls))
        return AssistantMessage(content="done")

    return FunctionModel(answer)


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def traceparent(span: ReadableSpan) -> str:
    trace_id, span_id = hex_ids(span)
    return f"00-{trace_id}-{span_id}-{int(span.context.trace_flags):02x}"


async def test_a_tools_own_spans_and_headers_are_under_its_execute_tool_span(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    user_tracer = tracer_provider.get_tracer("user code")
    sent: dict[str, dict[str, str]] = {}

    async def fetch(url: str) -> str:
        """Fetch a page (its headers are written down instead).

        Args:
            url: The page.
        """
        with user_tracer.start_as_current_span(f"GET {url}"):
            await anyio.lowlevel.checkpoint()
        sent[url] = outgoing_headers()
        return "fetched"

    # Two calls at once (a task each) and, next turn, a lone one (in the actor's task).
    turns = iter(
        [
            [ToolCall(name="fetch", args={"url": "a"}), ToolCall(name="fetch", args={"url": "b"})],
            [ToolCall(name="fetch", args={"url": "c"})],
            [],
        ]
    )
    agent = create_deep_agent(
        FunctionModel(lambda r: AssistantMessage(content="done", tool_calls=next(turns))),
        tools=[fetch],
    )
    async with open_runtime(tracing=Tracing(tracer_provider=tracer_provider)) as rt:
        await agent.ainvoke("go", runtime=rt)
    assert outgoing_headers() == {}  # nothing current out here
    spans = exporter.get_finished_spans()
    tools = [s for s in spans if s.name == "execute_tool fetch"]
    assert len(tools) == 3
    for url in "abc":
        (mine,) = [s for s in spans if s.name == f"GET {url}"]
        assert mine.parent is not None
        tool = next(t for t in tools if t.context.span_id == mine.parent.span_id)
        assert sent[url]["traceparent"] == traceparent(tool)


async def test_a_call_stopped_for_a_human_leaves_no_span_current_in_its_actor(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    current: list[str] = []

    def answer(request: ModelRequest) -> AssistantMessage:
        # The model is asked in the thread actor's own task, where a lone call runs.
        span = trace.get_current_span()
        current.append(getattr(span, "name", "-"))
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="publish", args={"text": "x"})])
        return AssistantMessage(content="done")

    def publish(text: str) -> str:
        """Publish.

        Args:
            text: What.
        """
        return "published"

    agent = create_deep_agent(
        FunctionModel(answer),
        tools=[publish],
        checkpointer=MemoryCheckpointer(),
        interrupt_on={"publish": True},
    )
    async with open_runtime(tracing=Tracing(tracer_provider=tracer_provider)) as rt:
        first = await agent.ainvoke("go", thread_id="t", runtime=rt)
        assert first["__interrupt__"]
        done = await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="t", runtime=rt)
    assert done["messages"][-1].text == "done"
    assert len(current) == 2
    assert not [name for name in current if name.startswith("execute_tool")]
    published = [s for s in exporter.get_finished_spans() if s.name == "execute_tool publish"]
    assert len(published) == 2  # stopped at, then run


@pytest.fixture
def traced_mcp(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The header-logging MCP server over streamable HTTP: its URL and its log."""
    port, log = free_port(), tmp_path / "headers.log"
    proc = subprocess.Popen(
        [sys.executable, str(APP), str(port), str(log)],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(proc, lambda: port_open(port), what="the traced MCP app started")
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@SDK_HTTP_ON_TRIO
async def test_mcp_requests_over_http_carry_the_tool_calls_traceparent(
    provider: tuple[TracerProvider, InMemorySpanExporter], traced_mcp: tuple[str, Path]
) -> None:
    tracer_provider, exporter = provider
    url, log = traced_mcp
    agent = create_deep_agent(
        calls_then_done(ToolCall(name="echo", args={"text": "hi"})),
        mcp_servers={"web": MCPServer.http(url, name="web")},
    )
    with anyio.fail_after(30):
        async with open_runtime(tracing=Tracing(tracer_provider=tracer_provider)) as rt:
            state = await agent.ainvoke("go", runtime=rt)
    assert state["messages"][-1].text == "done"
    spans = exporter.get_finished_spans()
    (call,) = [s for s in spans if s.name == "execute_tool echo"]
    (run,) = [s for s in spans if s.name == "invoke_agent main"]
    assert hex_ids(run)[0] == hex_ids(call)[0]
    lines = [line.split() for line in log.read_text().splitlines()]
    (called,) = [parent for parent, verb, method in lines if method == "tools/call"]
    # The server got the call's own span as its parent: the run's trace goes on there.
    assert called == traceparent(call)

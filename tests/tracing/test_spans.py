"""OpenTelemetry traces of the actor tree, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from deepactors import (
    AssistantMessage,
    Command,
    ToolCall,
    Usage,
    create_deep_agent,
    open_runtime,
)
from deepactors.errors import ModelAPIError, RateLimitError
from deepactors.events import Event, ModelDelta, StateUpdated
from deepactors.middleware import ModelFallbackMiddleware
from deepactors.models import FunctionModel, ModelRequest, StreamPart
from deepactors.persistence import MemoryCheckpointer
from deepactors.tracing import Tracing, tree_tracer

pytestmark = pytest.mark.anyio

USAGE = Usage(input_tokens=11, output_tokens=3, cache_read_tokens=5)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    spans.clear()


def provider_for(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def answer(text: str = "", *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        content=text, tool_calls=list(calls), usage=USAGE, stop_reason="end_turn"
    )


def task(brief: str, kind: str) -> ToolCall:
    return ToolCall(name="task", args={"description": brief, "subagent_type": kind})


def note(text: str) -> str:
    """Write a note.

    Args:
        text: What to write.
    """
    return f"noted {text}"


def publish(text: str) -> str:
    """Publish, once a human agrees.

    Args:
        text: What to publish.
    """
    return f"published {text}"


def three_levels() -> Any:
    """main -> middle -> leaf; main retries once, leaf falls back, main waits for a human."""

    def leaf_primary(request: ModelRequest) -> AssistantMessage:
        raise ModelAPIError("the primary is down")

    def leaf_backup(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return answer("", ToolCall(name="note", args={"text": "secret-leaf-args"}))
        return answer("leaf done")

    leaf = {
        "name": "leaf",
        "description": "leaf",
        "system_prompt": "leaf",
        "model": FunctionModel(leaf_primary, name="leaf-primary"),
        "tools": [note],
        "middleware": [ModelFallbackMiddleware(FunctionModel(leaf_backup, name="leaf-backup"))],
    }

    def middle_answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return answer("", task("dig", "leaf"))
        return answer("middle done")

    middle = create_deep_agent(
        FunctionModel(middle_answer, name="middle-model"), subagents=[leaf], name="middle"
    )
    failed_once = False

    def main_answer(request: ModelRequest) -> AssistantMessage:
        nonlocal failed_once
        if not failed_once:
            failed_once = True
            raise RateLimitError("slow down", retry_after=0)
        tools_seen = sum(1 for m in request.messages if m.role == "tool")
        if tools_seen == 0:
            return answer("", task("look", "middle"))
        if tools_seen == 1:
            return answer("", ToolCall(name="publish", args={"text": "report"}))
        return answer("all done")

    return create_deep_agent(
        FunctionModel(main_answer, name="main-model"),
        tools=[publish],
        subagents=[{"name": "middle", "description": "m", "agent": middle}],
        checkpointer=MemoryCheckpointer(),
        interrupt_on={"publish": True},
    )


def by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def parent_of(span: ReadableSpan, index: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return None if span.parent is None else index.get(span.parent.span_id)


async def test_one_trace_whose_span_tree_is_the_actor_tree(exporter: InMemorySpanExporter) -> None:
    provider = provider_for(exporter)
    agent = three_levels()
    outer = provider.get_tracer("test")
    async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
        with outer.start_as_current_span("session"):
            first = await agent.ainvoke("go", thread_id="t1", runtime=rt)
            assert first["__interrupt__"]
            done = await agent.ainvoke(
                Command(resume=[{"type": "approve"}]), thread_id="t1", runtime=rt
            )
    assert done["messages"][-1].text == "all done"
    spans = exporter.get_finished_spans()
    index = by_id(spans)
    (session,) = [s for s in spans if s.name == "session"]
    assert {s.context.trace_id for s in spans} == {session.context.trace_id}  # one trace

    mains = [s for s in spans if s.name == "invoke_agent main"]
    assert len(mains) == 2  # the interrupted run and its resume
    for run in mains:
        assert parent_of(run, index) is session
        assert run.attributes is not None
        assert run.attributes["gen_ai.conversation.id"] == "t1"
        assert run.attributes["gen_ai.agent.id"] == "main"
    interrupted = next(s for s in mains if any(e.name == "interrupt" for e in s.events))
    assert interrupted.attributes is not None
    assert interrupted.attributes["deepactors.outcome"] == "interrupted"

    # main -> execute_tool task -> invoke_agent middle -> execute_tool task -> invoke_agent leaf
    (middle,) = [s for s in spans if s.name == "invoke_agent middle"]
    (leaf,) = [s for s in spans if s.name == "invoke_agent leaf"]
    middle_call = parent_of(middle, index)
    assert middle_call is not None
    assert middle_call.name == "execute_tool task"
    assert parent_of(middle_call, index) is interrupted
    assert middle.attributes is not None
    assert middle.attributes["gen_ai.agent.id"] == "main/task-1:middle"
    leaf_call = parent_of(leaf, index)
    assert leaf_call is not None
    assert leaf_call.name == "execute_tool task"
    assert parent_of(leaf_call, index) is middle
    (leaf_note,) = [s for s in spans if s.name == "execute_tool note"]
    assert parent_of(leaf_note, index) is leaf
    assert leaf_note.attributes is not None
    assert "gen_ai.tool.call.arguments" not in leaf_note.attributes  # content is opt-in

    chats = [s for s in spans if s.name.startswith("chat ")]
    assert chats
    for chat in chats:
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 11, chat.name
        assert chat.attributes["gen_ai.usage.output_tokens"] == 3
        assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 5
        assert "gen_ai.output.messages" not in chat.attributes
        assert chat.kind.name == "CLIENT"
    retried = [s for s in chats if any(e.name == "retry" for e in s.events)]
    assert [s.attributes["gen_ai.request.model"] for s in retried if s.attributes] == ["main-model"]
    fell_back = [s for s in chats if any(e.name == "fallback" for e in s.events)]
    assert len(fell_back) == 2  # each of the leaf's two calls
    for chat in fell_back:
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.request.model"] == "leaf-primary"
        assert chat.attributes["gen_ai.response.model"] == "leaf-backup"
        assert parent_of(chat, index) is leaf
    # The human's approval: the publish call ran in the resumed run.
    stopped, published = sorted(
        (s for s in spans if s.name == "execute_tool publish"), key=lambda s: s.start_time or 0
    )
    # Stopped at for the human (not an error), then run in the resumed run.
    assert parent_of(stopped, index) is interrupted
    assert stopped.attributes is not None
    assert stopped.attributes["deepactors.outcome"] == "interrupted"
    assert stopped.status.status_code is not StatusCode.ERROR
    assert parent_of(published, index) in mains
    assert parent_of(published, index) is not interrupted
    assert published.status.status_code is not StatusCode.ERROR


async def test_content_is_recorded_when_asked_for(exporter: InMemorySpanExporter) -> None:
    provider = provider_for(exporter)
    agent = three_levels()
    tracing = Tracing(tracer_provider=provider, capture_content=True)
    async with open_runtime(tracing=tracing) as rt:
        await agent.ainvoke("go", thread_id="t2", runtime=rt)
    spans = exporter.get_finished_spans()
    (leaf_note,) = [s for s in spans if s.name == "execute_tool note"]
    assert leaf_note.attributes is not None
    assert json.loads(str(leaf_note.attributes["gen_ai.tool.call.arguments"])) == {
        "text": "secret-leaf-args"
    }
    assert leaf_note.attributes["gen_ai.tool.call.result"] == "noted secret-leaf-args"
    (leaf,) = [s for s in spans if s.name == "invoke_agent leaf"]
    assert leaf.attributes is not None
    assert "dig" in str(leaf.attributes["gen_ai.input.messages"])
    outputs = [
        json.loads(str(s.attributes["gen_ai.output.messages"]))
        for s in spans
        if s.name.startswith("chat ") and s.attributes
    ]
    assert any(part.get("name") == "note" for o in outputs for part in o[0]["parts"])


async def test_a_failed_run_and_its_open_spans_end_with_an_error(
    exporter: InMemorySpanExporter,
) -> None:
    def broken(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return answer("", task("try", "w"))
        raise ValueError("the parent's model broke")

    worker = {
        "name": "w",
        "description": "w",
        "system_prompt": "w",
        "model": FunctionModel(lambda r: answer("fine")),
    }
    agent = create_deep_agent(FunctionModel(broken), subagents=[worker])
    provider = provider_for(exporter)
    async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
        with pytest.raises(ValueError, match="broke"):
            await agent.ainvoke("go", runtime=rt)
    spans = exporter.get_finished_spans()
    (main,) = [s for s in spans if s.name == "invoke_agent main"]
    assert main.status.status_code is StatusCode.ERROR
    assert "broke" in (main.status.description or "")
    # What the tree spent before it failed (its first call and the worker's) is on it.
    assert main.attributes is not None
    assert main.attributes["gen_ai.usage.input_tokens"] == 2 * USAGE.input_tokens
    assert main.attributes["gen_ai.usage.output_tokens"] == 2 * USAGE.output_tokens
    # The model call that raised ended with the run, as an error, inside it.
    last_chat = max(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert last_chat.status.status_code is StatusCode.ERROR
    assert last_chat.parent is not None
    assert last_chat.parent.span_id == main.context.span_id
    (worker_span,) = [s for s in spans if s.name == "invoke_agent w"]
    assert worker_span.status.status_code is not StatusCode.ERROR  # it finished first
    # Every span ended no later than its parent.
    index = by_id(spans)
    for span in spans:
        parent = parent_of(span, index)
        if parent is not None:
            assert (span.end_time or 0) <= (parent.end_time or 0), span.name


async def test_tracing_off_makes_no_tracer(exporter: InMemorySpanExporter) -> None:
    assert tree_tracer(None, thread_id=None) is None
    # The global provider is the API's proxy (no SDK set up globally here).
    assert tree_tracer(Tracing(), thread_id=None) is None
    provider = provider_for(exporter)
    async with open_runtime(tracing=False) as rt:
        await create_deep_agent(FunctionModel(lambda r: "hi")).ainvoke("go", runtime=rt)
    assert exporter.get_finished_spans() == ()
    assert provider is not None


def test_without_a_provider_opentelemetry_is_never_imported() -> None:
    code = (
        "import sys, deepactors\n"
        "from deepactors.models import FunctionModel\n"
        "a = deepactors.create_deep_agent(FunctionModel(lambda r: 'hi'))\n"
        "assert a.invoke('go')['messages'][-1].text == 'hi'\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class StreamCounting(FunctionModel):
    """A FunctionModel that counts the calls made through its stream."""

    streamed = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        StreamCounting.streamed += 1
        async for part in super().stream(request):
            yield part


async def test_a_tracer_alone_asks_for_no_deltas_or_state_snapshots(
    exporter: InMemorySpanExporter,
) -> None:
    provider = provider_for(exporter)
    agent = create_deep_agent(StreamCounting(lambda r: answer("hi")))
    StreamCounting.streamed = 0
    async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
        await agent.ainvoke("go", runtime=rt)
        assert StreamCounting.streamed == 0  # called as an untraced run calls it
        seen: list[Event] = []
        handle = await rt.thread(agent).start("go", on_event=seen.append)
        await handle.result()
    # A listener of the user's still gets every event, the tracer beside it.
    assert StreamCounting.streamed == 1
    assert any(isinstance(e, ModelDelta) for e in seen)
    assert any(isinstance(e, StateUpdated) for e in seen)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2

"""LangChain/LangGraph views: message dicts both ways, state as JSON, and stream parts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepactors import (
    AssistantMessage,
    Command,
    SystemMessage,
    TextBlock,
    ToolCall,
    ToolMessage,
    ToolRuntime,
    Usage,
    UserMessage,
    create_deep_agent,
)
from deepactors.langchain.views import (
    LangGraphStream,
    StreamPart,
    event_to_json,
    interrupts_to_lc,
    message_from_lc,
    message_to_lc,
    namespace_of,
    parse_stream_modes,
    values_to_lc,
)
from deepactors.messages import ThinkingBlock
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer


def test_messages_round_trip_through_langchain_dicts() -> None:
    messages = [
        SystemMessage(content="be brief"),
        UserMessage(content=[TextBlock(text="hi")]),
        AssistantMessage(
            content=[ThinkingBlock(thinking="hm", signature="s"), TextBlock(text="hello")],
            tool_calls=[
                ToolCall(id="c1", name="search", args={"q": "x"}),
                ToolCall(id="c2", name="broken", args={}, error="invalid JSON"),
            ],
            usage=Usage(
                input_tokens=10, output_tokens=5, cache_read_tokens=3, cache_write_tokens=2
            ),
            stop_reason="tool_use",
            model="m1",
        ),
        ToolMessage(tool_call_id="c1", name="search", content="found", status="error"),
    ]
    dicts = [message_to_lc(m) for m in messages]
    assert [d["type"] for d in dicts] == ["system", "human", "ai", "tool"]
    ai = dicts[2]
    assert ai["tool_calls"] == [
        {"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}
    ]
    assert ai["invalid_tool_calls"][0]["error"] == "invalid JSON"
    assert ai["usage_metadata"]["input_tokens"] == 15  # LangChain counts cached input in
    assert ai["usage_metadata"]["total_tokens"] == 20
    assert ai["response_metadata"] == {"model_name": "m1", "stop_reason": "tool_use"}
    assert dicts[3]["tool_call_id"] == "c1"
    assert dicts[3]["status"] == "error"
    json.dumps(dicts)  # JSON-ready as is
    assert [message_from_lc(d) for d in dicts] == messages


def test_message_from_lc_refuses_a_bad_message_naming_the_field() -> None:
    from deepactors import InputError

    with pytest.raises(InputError, match="tool_call_id"):
        message_from_lc({"type": "tool", "content": "x"})


def test_interrupts_are_one_entry_per_stop_with_deepagents_value() -> None:
    requests = [
        {
            "id": "a",
            "tool": "edit",
            "args": {"p": 1},
            "path": "main",
            "allowed_decisions": ["approve"],
        },
        {"id": "b", "tool": "rm", "args": {}, "path": "main", "allowed_decisions": ["reject"]},
    ]
    (entry,) = interrupts_to_lc(requests)
    assert entry["id"] == "interrupt-a"
    assert [r["name"] for r in entry["value"]["action_requests"]] == ["edit", "rm"]
    assert entry["value"]["review_configs"][1] == {
        "action_name": "rm",
        "allowed_decisions": ["reject"],
    }


def test_namespaces_and_modes() -> None:
    assert namespace_of("main") == ()
    assert namespace_of("main/task-2:researcher/task-1:x") == ("task-2:researcher", "task-1:x")
    assert parse_stream_modes(["values", "messages-tuple", "values"]) == ("values", "messages")
    with pytest.raises(ValueError, match="unknown stream mode 'tokens'"):
        parse_stream_modes("tokens")


async def note(text: str, runtime: ToolRuntime) -> str:
    """Write a note and report progress.

    Args:
        text: The note.
    """
    runtime.write({"progress": text})
    return f"noted {text}"


def researcher(request: ModelRequest) -> AssistantMessage:
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        return AssistantMessage(tool_calls=[ToolCall(name="note", args={"text": "sub"})])
    return AssistantMessage(content="sub done")


def main_model(request: ModelRequest) -> AssistantMessage:
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if not results:
        return AssistantMessage(
            content="delegating",
            tool_calls=[
                ToolCall(name="task", args={"description": "look", "subagent_type": "r"}),
                ToolCall(name="note", args={"text": "main"}),
            ],
        )
    return AssistantMessage(content="all done, thanks for waiting")


def build_agent(**kwargs: Any) -> Any:
    sub = {
        "name": "r",
        "description": "r",
        "system_prompt": "r",
        "model": FunctionModel(researcher),
        "tools": [note],
    }
    return create_deep_agent(FunctionModel(main_model), tools=[note], subagents=[sub], **kwargs)


async def run_parts(modes: Any, *, subgraphs: bool = False) -> tuple[list[StreamPart], Any]:
    adapter = LangGraphStream(modes, subgraphs=subgraphs)
    parts: list[StreamPart] = []
    async with build_agent().astream("go") as events:
        async for event in events:
            parts.extend(adapter.feed(event))
    json.dumps([p.data for p in parts])  # every part is JSON-ready
    return parts, events.result


@pytest.mark.anyio
async def test_values_follow_the_steps_and_end_on_the_final_state() -> None:
    parts, result = await run_parts("values")
    assert all(p.mode == "values" and p.namespace == () for p in parts)
    firsts = [[m["type"] for m in p.data["messages"]] for p in parts]
    # input, model answer, the tool step (both results at once), final answer
    assert firsts == [
        ["human"],
        ["human", "ai"],
        ["human", "ai", "tool", "tool"],
        ["human", "ai", "tool", "tool", "ai"],
    ]
    assert parts[-1].data == values_to_lc(result)


@pytest.mark.anyio
async def test_updates_are_keyed_by_node() -> None:
    parts, _ = await run_parts(["updates"])
    nodes = [next(iter(p.data)) for p in parts]
    assert nodes == ["model", "tools", "model"]
    tool_step = parts[1].data["tools"]
    assert {m["name"] for m in tool_step["messages"]} == {"task", "note"}


@pytest.mark.anyio
async def test_messages_stream_chunks_then_tool_results() -> None:
    parts, result = await run_parts("messages-tuple")
    assert all(p.mode == "messages" for p in parts)
    chunks = [p.data[0] for p in parts if p.data[0]["type"] == "AIMessageChunk"]
    last_call = [c for c in chunks if c["id"] == chunks[-1]["id"]]
    assert len(last_call) > 2  # the text arrived in pieces
    assert "".join(c["content"] for c in last_call) == result["messages"][-1].text
    first_call_end = next(c for c in chunks if c["tool_calls"])
    assert [c["name"] for c in first_call_end["tool_calls"]] == ["task", "note"]
    tools = [p.data for p in parts if p.data[0]["type"] == "tool"]
    assert {t[0]["name"] for t in tools} == {"task", "note"}
    assert all(meta["langgraph_node"] == "tools" for _, meta in tools)


@pytest.mark.anyio
async def test_subgraphs_stream_under_the_child_namespace() -> None:
    parts, _ = await run_parts(["custom", "values"], subgraphs=True)
    custom = [(p.namespace, p.data) for p in parts if p.mode == "custom"]
    assert sorted(custom) == [((), {"progress": "main"}), (("task-1:r",), {"progress": "sub"})]
    child_values = [p for p in parts if p.mode == "values" and p.namespace == ("task-1:r",)]
    assert child_values[-1].data["messages"][-1]["content"] == "sub done"
    root_only, _ = await run_parts(["custom"])
    assert [p.data for p in root_only] == [{"progress": "main"}]


@pytest.mark.anyio
async def test_events_mode_gives_every_typed_event_as_json() -> None:
    parts, _ = await run_parts("events")
    kinds = [p.data["event"] for p in parts]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert "model_delta" in kinds
    assert "tool_call_finished" in kinds
    finished = next(p.data for p in parts if p.data["event"] == "model_call_finished")
    assert finished["message"]["role"] == "assistant"
    assert finished["path"] == "main"


@pytest.mark.anyio
async def test_an_interrupt_reaches_values_as_langgraph_interrupts() -> None:
    agent = build_agent(checkpointer=MemoryCheckpointer(), interrupt_on={"note": True})
    adapter = LangGraphStream("values")
    parts: list[StreamPart] = []
    async with agent.astream("go", thread_id="t") as events:
        async for event in events:
            parts.extend(adapter.feed(event))
    (interrupt,) = parts[-1].data["__interrupt__"]
    # the main agent's note and the subagent's (interrupt_on is inherited): one stop
    assert [r["name"] for r in interrupt["value"]["action_requests"]] == ["note", "note"]
    decisions = [{"type": "approve"}, {"type": "approve"}]
    result = await agent.ainvoke(Command(resume=decisions), thread_id="t")
    assert result["messages"][-1].text == "all done, thanks for waiting"


def test_event_json_of_a_state_update_uses_langchain_shapes() -> None:
    from deepactors.events import StateUpdated

    msg = UserMessage(content="hi")
    data = event_to_json(
        StateUpdated(
            path="main", run_id="r", update={"messages": [msg]}, values={"messages": [msg]}
        )
    )
    assert data["event"] == "state_updated"
    assert data["update"]["messages"][0]["type"] == "human"

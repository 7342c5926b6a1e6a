"""LangGraph's ``RemoteGraph`` against ``deepactors serve``: state, history, an
invoke that stops for approval, and ``Command(resume=...)`` that continues it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_sync_client


@pytest.fixture
def graph(url: str) -> Iterator[RemoteGraph]:
    # Its own client, closed after the test (RemoteGraph(url=...) never closes the one it makes).
    with get_sync_client(url=url) as client:
        yield RemoteGraph("agent", sync_client=client)


def _config() -> Any:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_invoke_get_state_and_history(graph: RemoteGraph) -> None:
    config = _config()
    result = graph.invoke(_say("hello"), config)
    assert result["messages"][-1]["content"] == "echo #1: hello"
    state = graph.get_state(config)
    assert state.values["messages"][-1]["content"] == "echo #1: hello"
    assert state.next == ()
    history = list(graph.get_state_history(config))
    assert (
        history[0].config["configurable"]["checkpoint_id"]
        == (state.config["configurable"]["checkpoint_id"])
    )
    # get_state at a checkpoint of the history: the thread as it was then.
    oldest = graph.get_state(history[-1].config)
    assert oldest.values["messages"][0]["content"] == "hello"


def test_an_approval_shows_interrupt_and_resume_continues(graph: RemoteGraph) -> None:
    config = _config()
    stopped = graph.invoke(_say("email bob"), config)
    assert "__interrupt__" in stopped
    request = stopped["__interrupt__"][0]["value"]["action_requests"][0]
    assert request["name"] == "send_email"
    state = graph.get_state(config)
    assert state.next == ("tools",)
    assert state.interrupts
    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert done["messages"][-1]["content"] == "sent: sent to bob: email bob"
    assert "__interrupt__" not in done
    assert graph.get_state(config).next == ()


def test_stream_updates_show_the_interrupt(graph: RemoteGraph) -> None:
    config = _config()
    chunks = list(graph.stream(_say("email al"), config, stream_mode="updates"))
    assert any("__interrupt__" in chunk for chunk in chunks)
    result = graph.invoke(Command(resume=[{"type": "reject", "message": "no"}]), config)
    assert result["messages"][-1]["content"].startswith("not sent")


def test_update_state_then_continue(graph: RemoteGraph) -> None:
    config = _config()
    graph.invoke(_say("one"), config)
    updated = graph.update_state(config, {"messages": [{"role": "user", "content": "two"}]})
    assert graph.get_state(updated).values["messages"][-1]["content"] == "two"
    result = graph.invoke(_say("three"), config)
    assert result["messages"][-1]["content"] == "echo #3: three"


def test_a_breakpoint_before_tools_and_the_approval_at_that_step(graph: RemoteGraph) -> None:
    config = _config()
    # The approval comes first at the tool step the breakpoint stops before.
    stopped = graph.invoke(_say("email bob"), config, interrupt_before=["tools"])
    assert stopped["__interrupt__"][0]["value"]["action_requests"][0]["name"] == "send_email"
    assert graph.get_state(config).next == ("tools",)
    done = graph.invoke(
        Command(resume={"decisions": [{"type": "approve"}]}), config, interrupt_before=["tools"]
    )
    assert done["messages"][-1]["content"] == "sent: sent to bob: email bob"


def test_a_breakpoint_after_the_model(graph: RemoteGraph) -> None:
    config = _config()
    graph.invoke(_say("hello"), config, interrupt_after=["model"])
    state = graph.get_state(config)
    # Stopped after the model's answer: nothing runs next, no interrupt.
    assert (state.next, state.interrupts) == ((), ())
    assert state.values["messages"][-1]["content"] == "echo #1: hello"


def test_get_graph(graph: RemoteGraph) -> None:
    drawn = graph.get_graph()
    assert drawn.nodes


MODES = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]
"""Every stream mode RemoteGraph knows (LangGraph's StreamMode)."""


@pytest.mark.parametrize("mode", [m for m in MODES if m != "custom"])
def test_every_stream_mode_streams_alone(graph: RemoteGraph, mode: str) -> None:
    parts = list(graph.stream(_say("hello"), _config(), stream_mode=mode))
    assert parts, f"nothing streamed in mode {mode!r}"


def test_tasks_and_checkpoints_follow_the_steps_with_every_mode_at_once(
    graph: RemoteGraph,
) -> None:
    config = _config()
    # With several modes, RemoteGraph yields the SDK's parts: (event, data, id).
    parts = [(p.event, p.data) for p in graph.stream(_say("email bob"), config, stream_mode=MODES)]
    assert {mode for mode, _ in parts} >= set(MODES) - {"custom"}
    tasks = [data for mode, data in parts if mode == "tasks"]
    # The model's task starts (from the input) and ends with the call it asked for;
    # the tools' task starts and is stopped by the approval it waits for.
    assert [(t["name"], "result" in t) for t in tasks] == [
        ("model", False),
        ("model", True),
        ("tools", False),
        ("tools", True),
    ]
    assert tasks[0]["id"] == tasks[1]["id"]
    assert tasks[3]["result"] == {}
    assert tasks[3]["interrupts"][0]["value"]["action_requests"][0]["name"] == "send_email"
    assert tasks[0]["input"]["messages"][0]["content"] == "email bob"
    assert tasks[1]["result"]["messages"][-1]["tool_calls"][0]["name"] == "send_email"
    checkpoints = [data for mode, data in parts if mode == "checkpoints"]
    assert [c["metadata"]["source"] for c in checkpoints] == ["input", "loop"]
    assert [c["next"] for c in checkpoints] == [["model"], ["tools"]]
    first, second = (c["config"]["configurable"] for c in checkpoints)
    assert checkpoints[1]["parent_config"]["configurable"] == first
    assert second["thread_id"] == config["configurable"]["thread_id"]
    assert checkpoints[1]["tasks"][0]["id"] == tasks[0]["id"]
    # Approved: the tools' task, then the model's, and a last checkpoint with nothing next.
    resumed = [
        (p.event, p.data)
        for p in graph.stream(
            Command(resume={"decisions": [{"type": "approve"}]}),
            config,
            stream_mode=["tasks", "checkpoints"],
        )
    ]
    names = [(d["name"], "result" in d) for mode, d in resumed if mode == "tasks"]
    assert names == [("tools", False), ("tools", True), ("model", False), ("model", True)]
    last = [d for mode, d in resumed if mode == "checkpoints"][-1]
    assert last["next"] == []
    assert last["values"]["messages"][-1]["content"] == "sent: sent to bob: email bob"

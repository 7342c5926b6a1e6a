"""interrupt_before / interrupt_after through the real langgraph-sdk (uvicorn, hypercorn+trio)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app

from .conftest import Served

Serve = Callable[..., Served]
USER = {"messages": [{"role": "user", "content": "go"}]}


async def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


def two_tool_steps(request: ModelRequest) -> AssistantMessage:
    done = sum(isinstance(m, ToolMessage) for m in request.messages)
    if done < 2:
        n = done + 1
        return AssistantMessage(
            tool_calls=[ToolCall(id=f"c{n}", name="shout", args={"text": f"t{n}"})]
        )
    return AssistantMessage(content="finished")


def app() -> Any:
    agent = create_deep_agent(
        FunctionModel(two_tool_steps), tools=[shout], checkpointer=MemoryCheckpointer()
    )
    return create_app({"agent": agent})


def tool_results(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["type"] == "tool"]


def test_interrupt_before_tools_stops_before_each_tool_step_and_resumes(serve: Serve) -> None:
    client = serve(app()).client()
    thread = client.threads.create()["thread_id"]
    first = client.runs.wait(thread, "agent", input=USER, interrupt_before=["tools"])
    assert isinstance(first, dict)
    assert tool_results(first) == []
    state = client.threads.get_state(thread)
    assert state["next"] == ["tools"]
    assert [(t["name"], t["interrupts"]) for t in state["tasks"]] == [("tools", [])]
    assert client.threads.get(thread)["status"] == "interrupted"
    # Continued with input None and the same breakpoints: the next tool step
    # stops, and a stream of updates says so as LangGraph's does.
    parts = [
        (p.event, p.data)
        for p in client.runs.stream(
            thread, "agent", input=None, interrupt_before=["tools"], stream_mode="updates"
        )
    ]
    assert parts[-1] == ("updates", {"__interrupt__": []})
    state = client.threads.get_state(thread)
    assert (state["next"], tool_results(state["values"])) == (["tools"], ["T1"])
    # Without breakpoints, to the end.
    done = client.runs.wait(thread, "agent", input=None)
    assert isinstance(done, dict)
    assert done["messages"][-1]["content"] == "finished"
    state = client.threads.get_state(thread)
    assert (state["next"], state["tasks"]) == ([], [])
    assert client.threads.get(thread)["status"] == "idle"


def test_interrupt_after_model_and_a_resume_command(serve: Serve) -> None:
    client = serve(app()).client()
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "agent", input=USER, interrupt_after=["model"])
    client.runs.join(thread, run["run_id"])
    state = client.threads.get_state(thread)
    assert state["next"] == ["tools"]
    assert tool_results(state["values"]) == []
    # LangGraph's Command(resume=...) goes past a breakpoint too.
    client.runs.wait(thread, "agent", command={"resume": "ok"}, interrupt_after="model")
    state = client.threads.get_state(thread)
    assert (state["next"], tool_results(state["values"])) == (["tools"], ["T1"])


def test_bad_breakpoints_are_a_422_that_says_why(serve: Serve) -> None:
    client = serve(app()).client()
    thread = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError, match="'model', 'tools'"):
        client.runs.wait(thread, "agent", input=USER, interrupt_before=["agent"])
    with pytest.raises(httpx.HTTPStatusError, match="stateless"):
        client.runs.wait(None, "agent", input=USER, interrupt_before=["tools"])


def test_command_goto_a_node_and_update_with_resume(serve: Serve) -> None:
    client = serve(app()).client()
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "agent", input=USER, interrupt_before=["tools"])
    with pytest.raises(httpx.HTTPStatusError, match=r"no tool call waiting|without results"):
        client.runs.wait(thread, "agent", command={"goto": "model"})
    client.runs.wait(
        thread,
        "agent",
        command={"goto": "tools", "update": {"todos": [{"content": "x", "status": "pending"}]}},
        interrupt_after=["tools"],
    )
    state = client.threads.get_state(thread)
    assert (state["next"], tool_results(state["values"])) == (["model"], ["T1"])
    assert state["values"]["todos"][0]["content"] == "x"
    with pytest.raises(httpx.HTTPStatusError, match=r"command\.goto"):
        client.runs.wait(thread, "agent", command={"goto": "agent"})


def test_crons_take_breakpoints_where_their_runs_threads_are_kept(serve: Serve) -> None:
    client = serve(app()).client()
    thread = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        thread, "agent", schedule="0 0 1 1 *", input=USER, interrupt_before=["tools"]
    )
    assert cron["cron_id"]
    with pytest.raises(httpx.HTTPStatusError, match="deleted as they end"):
        client.crons.create("agent", schedule="0 0 1 1 *", input=USER, interrupt_after="model")
    with pytest.raises(httpx.HTTPStatusError, match="unknown node"):
        client.crons.create_for_thread(
            thread, "agent", schedule="0 0 1 1 *", input=USER, interrupt_before=["agent"]
        )

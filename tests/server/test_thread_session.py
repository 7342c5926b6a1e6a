"""client.threads.stream (LangGraph's v3 thread session) through the real langgraph-sdk."""

from __future__ import annotations

import time
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


async def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


def one_tool_then_answer(request: ModelRequest) -> AssistantMessage:
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if not results:
        return AssistantMessage(tool_calls=[ToolCall(id="c1", name="shout", args={"text": "hi"})])
    return AssistantMessage(content=f"done: {results[-1].text}")


def app(**options: Any) -> Any:
    agent = create_deep_agent(
        FunctionModel(one_tool_then_answer),
        tools=[shout],
        checkpointer=MemoryCheckpointer(),
        **options,
    )
    return create_app({"agent": agent})


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def contents(values: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


def test_a_run_started_in_a_session_gives_the_output_runs_wait_gives(serve: Serve) -> None:
    client = serve(app()).client()
    with client.threads.stream(assistant_id="agent") as thread:
        started = thread.run.start(input=say("go"))
        assert isinstance(started["run_id"], str)
        output = thread.output
    other = client.threads.create()["thread_id"]
    waited = client.runs.wait(other, "agent", input=say("go"))
    assert isinstance(waited, dict)
    assert contents(output) == contents(waited)
    assert contents(output)[-1] == ("ai", "done: HI")

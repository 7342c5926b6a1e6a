"""Forked subagents: the child starts from its parent's conversation and system prompt."""

from __future__ import annotations

from typing import Any

import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.errors import ConfigurationError
from deepactors.middleware import FORK_PREAMBLE
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def parent_model(tool: str) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage | str:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text == "my name is Ada":
            return "nice to meet you, Ada"
        if isinstance(last, UserMessage) and last.text.startswith("[Background task"):
            return "the fork is done"
        if isinstance(last, UserMessage):
            args: dict[str, Any] = {"description": "greet the user by name", "subagent_type": "f"}
            return AssistantMessage(tool_calls=[ToolCall(name=tool, args=args)])
        results = [m.text for m in request.messages if isinstance(m, ToolMessage)]
        return "child said: " + " | ".join(results)

    return FunctionModel(answer)


class Recorder:
    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> str:
        self.requests.append(request)
        ada = any("Ada" in m.text for m in request.messages)
        return "hello Ada" if ada else "hello, whoever you are"


def agent(mode: str, seen: Recorder, **kwargs: Any) -> Any:
    return create_deep_agent(
        parent_model(kwargs.pop("tool", "task")),
        system_prompt="You are the parent agent.",
        subagents=[
            {
                "name": "f",
                "description": "a fork",
                "system_prompt": "You are the child agent.",
                "model": FunctionModel(seen),
                "mode": mode,
                **kwargs,
            }
        ],
    )


async def run_twice(deep: Any) -> dict[str, Any]:
    history = [
        UserMessage(content="my name is Ada"),
        AssistantMessage(content="nice to meet you, Ada"),
        UserMessage(content="now greet me"),
    ]
    return await deep.ainvoke({"messages": history})  # type: ignore[no-any-return]


async def test_a_fork_sees_the_conversation_and_the_parent_prompt() -> None:
    seen = Recorder()
    result = await run_twice(agent("fork", seen))
    assert result["messages"][-1].text == "child said: hello Ada"
    (request,) = seen.requests
    texts = [m.text for m in request.messages]
    assert texts[:3] == ["my name is Ada", "nice to meet you, Ada", "now greet me"]
    assert texts[3] == FORK_PREAMBLE + "greet the user by name"
    assert request.system_prompt is not None
    assert request.system_prompt.startswith("You are the parent agent.")
    assert "You are the child agent." not in request.system_prompt


async def test_an_isolated_child_sees_only_its_brief() -> None:
    seen = Recorder()
    result = await run_twice(agent("isolated", seen))
    assert result["messages"][-1].text == "child said: hello, whoever you are"
    (request,) = seen.requests
    assert [m.text for m in request.messages] == ["greet the user by name"]
    assert request.system_prompt is not None
    assert request.system_prompt.startswith("You are the child agent.")


async def test_a_background_fork_sees_the_conversation_too() -> None:
    seen = Recorder()
    deep = agent("fork", seen, tool="start_async_task", background=True)
    result = await run_twice(deep)
    (request,) = seen.requests
    assert [m.text for m in request.messages][:3] == [
        "my name is Ada",
        "nice to meet you, Ada",
        "now greet me",
    ]
    statuses = {e["status"] for e in result["async_tasks"].values()}
    assert statuses == {"success"}


def test_a_bad_mode_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="mode"):
        agent("sideways", Recorder())

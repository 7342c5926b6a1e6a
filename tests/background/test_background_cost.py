"""Background bookkeeping exists only for agents that can start background tasks.

What a tool sees of its tree (``runtime.run.tree.background``) says whether the
thread's actor keeps a registry: None for an agent with no background tools
anywhere under it, a registry when the agent, or a subagent of it, has them.
"""

from __future__ import annotations

from typing import Any

import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.actors import BackgroundTasks, open_runtime
from deepactors.context import ToolRuntime
from deepactors.models import FunctionModel, ModelRequest
from deepactors.tools import tool

pytestmark = pytest.mark.anyio


def peeker(seen: list[tuple[str, Any]]) -> Any:
    @tool
    def peek(runtime: ToolRuntime) -> str:
        """Say what the tree keeps for background tasks."""
        seen.append((runtime.run.path, runtime.run.tree.background))
        return "peeked"

    return peek


def scripted(*turns: list[ToolCall]) -> FunctionModel:
    """Makes ``turns[i]``'s calls at its i-th model call, then answers with the results."""

    def answer(request: ModelRequest) -> AssistantMessage:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done < len(turns):
            return AssistantMessage(tool_calls=turns[done])
        results = [m.text for m in request.messages if isinstance(m, ToolMessage)]
        return AssistantMessage(content="done: " + " | ".join(results))

    return FunctionModel(answer)


async def test_an_agent_without_background_tools_keeps_no_registry() -> None:
    seen: list[tuple[str, Any]] = []
    peek = peeker(seen)
    # The parent peeks and delegates; its child inherits its tools.
    main = scripted(
        [
            ToolCall(name="peek", args={}),
            ToolCall(name="task", args={"description": "peek", "subagent_type": "helper"}),
        ]
    )
    child = scripted([ToolCall(name="peek", args={})])
    helper = {"name": "helper", "description": "peeks", "system_prompt": "peek", "model": child}
    agent = create_deep_agent(main, tools=[peek], subagents=[helper])
    assert not agent.spec.starts_background
    async with open_runtime() as rt:
        result = await (await rt.thread(agent, "t").start({"messages": "go"})).result()
    assert result["messages"][-1].text.startswith("done")
    assert sorted(path.count("/") for path, _ in seen) == [0, 1]  # parent and child peeked
    assert [background for _, background in seen] == [None, None]


async def test_an_agent_whose_subagent_starts_background_tasks_keeps_one() -> None:
    seen: list[tuple[str, Any]] = []
    peek = peeker(seen)
    researcher = FunctionModel(lambda request: AssistantMessage(content="report"))
    # Only the lead (a subagent) has the background tools: the thread's actor,
    # whose agent is the parent, must keep their registry all the same.
    lead = create_deep_agent(
        scripted(
            [
                ToolCall(name="peek", args={}),
                ToolCall(
                    name="start_async_task",
                    args={"description": "look", "subagent_type": "researcher"},
                ),
            ]
        ),
        tools=[peek],
        name="lead",
        subagents=[
            {
                "name": "researcher",
                "description": "researches",
                "system_prompt": "research",
                "model": researcher,
                "background": True,
            }
        ],
    )
    agent = create_deep_agent(
        scripted([ToolCall(name="task", args={"description": "lead", "subagent_type": "lead"})]),
        subagents=[{"name": "lead", "description": "leads", "agent": lead}],
    )
    async with open_runtime() as rt:
        result = await (await rt.thread(agent, "t").start({"messages": "go"})).result()
    # The lead started its task, waited for it (a subagent's tasks end with it)
    # and reported; its answer is the parent's task result.
    answer = result["messages"][-1].text
    assert "Launched async subagent" in answer, answer
    assert [type(background) for _, background in seen] == [BackgroundTasks]
    assert lead.spec.starts_background
    assert agent.spec.starts_background

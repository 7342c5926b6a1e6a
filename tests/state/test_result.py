"""A run's result is typed (``AgentResult``) and still the dict deepagents scripts index."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from deepactors import (
    AgentResult,
    AssistantMessage,
    Budget,
    MemoryCheckpointer,
    ToolCall,
    create_deep_agent,
    open_runtime,
)
from deepactors.budget import BudgetReport
from deepactors.messages import Usage
from deepactors.middleware import HumanInTheLoopMiddleware
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


class Report(BaseModel):
    """What the agent found."""

    title: str


async def test_a_result_reads_as_attributes_and_as_the_dict_it_is() -> None:
    answers = [
        AssistantMessage(
            tool_calls=[ToolCall(name="Report", args={"title": "done"})],
            usage=Usage(input_tokens=3, output_tokens=2),
        ),
    ]

    def answer(request: ModelRequest) -> AssistantMessage:
        return answers.pop(0)

    agent = create_deep_agent(FunctionModel(answer), response_format=Report)
    result: AgentResult[Report] = await agent.ainvoke("go", budget=Budget(model_calls=5))
    assert isinstance(result, AgentResult)
    assert isinstance(result, dict)
    assert result.messages is result["messages"]
    assert result.files is result["files"]
    assert result.todos is result["todos"]
    assert result.structured_response == Report(title="done") == result["structured_response"]
    assert isinstance(result.usage, Usage)
    assert result.usage is result["usage"]
    assert result.usage.output_tokens == 2
    assert isinstance(result.budget, BudgetReport)
    assert result.budget.model_calls == 1
    assert result.interrupts == []
    assert "__interrupt__" not in result
    assert result.get("nope", 7) == 7  # ported scripts' dict calls keep working


async def test_the_interrupts_a_run_stopped_for_are_typed_too() -> None:
    def answer(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(tool_calls=[ToolCall(name="write_todos", args={"todos": []})])

    agent = create_deep_agent(
        FunctionModel(answer),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"write_todos": True})],
        checkpointer=MemoryCheckpointer(),
    )
    async with open_runtime() as rt:
        result = await rt.thread(agent, "t").ainvoke("go")
    assert isinstance(result, AgentResult)
    assert result.interrupts is result["__interrupt__"]
    assert [r["tool"] for r in result.interrupts] == ["write_todos"]

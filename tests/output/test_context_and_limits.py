"""Runtime context (``context_schema``) and per-run / per-thread call limits."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from deepactors import (
    AssistantMessage,
    CallLimitExceeded,
    InputError,
    RunContext,
    ToolCall,
    ToolMessage,
    ToolRuntime,
    create_deep_agent,
    open_runtime,
)
from deepactors.errors import ConfigurationError
from deepactors.middleware import (
    ModelCallLimitMiddleware,
    ToolCallLimitMiddleware,
    before_model,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.state import State
from tests.output.conftest import lookup, looping_model, subagent, tool_results

pytestmark = pytest.mark.anyio


class Caller(BaseModel):
    user_id: str
    tier: int = 1


@dataclasses.dataclass
class Plain:
    user_id: str


async def test_context_is_validated_and_reaches_tools_middleware_and_subagents() -> None:
    seen: list[tuple[str, Any]] = []

    async def whoami(runtime: ToolRuntime) -> str:
        """Say who is asking."""
        seen.append((runtime.path, runtime.context))
        return runtime.context.user_id  # type: ignore[no-any-return]

    @before_model
    def watch(state: State, run: RunContext) -> None:
        seen.append((f"hook {run.path}", run.context))

    def worker(request: ModelRequest) -> AssistantMessage:
        if not tool_results(request):
            return AssistantMessage(tool_calls=[ToolCall(name="whoami", args={})])
        return AssistantMessage(content="child done")

    def main(request: ModelRequest) -> AssistantMessage:
        if not tool_results(request):
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="whoami", args={}),
                    ToolCall(name="task", args={"description": "x", "subagent_type": "w"}),
                ]
            )
        return AssistantMessage(content="done")

    agent = create_deep_agent(
        FunctionModel(main),
        tools=[whoami],
        middleware=[watch],
        context_schema=Caller,
        subagents=[subagent("w", FunctionModel(worker), tools=[whoami])],
    )
    await agent.ainvoke("go", context={"user_id": "u1", "tier": "2"})
    paths = {path for path, _ in seen}
    assert {"main", "main/task-1:w", "hook main"} <= paths
    for _, context in seen:
        assert context == Caller(user_id="u1", tier=2)  # one validated instance everywhere


async def test_bad_context_is_refused_before_any_model_call() -> None:
    model = FunctionModel(lambda r: "hi")
    agent = create_deep_agent(model, context_schema=Caller)
    with pytest.raises(InputError, match="user_id: Field required"):
        await agent.ainvoke("go")
    with pytest.raises(InputError, match="tier: Input should be a valid integer"):
        await agent.ainvoke("go", context={"user_id": "u", "tier": "high"})
    async with open_runtime() as rt:
        with pytest.raises(InputError, match="context_schema"):
            await rt.thread(agent).start("go", context={"tier": 1})
    with pytest.raises(InputError, match="context_schema"):
        agent.astream("go", context=[1])
    assert model.calls == 0
    plain = create_deep_agent(FunctionModel(lambda r: "hi"))
    with pytest.raises(InputError, match="context must be a dict"):
        await plain.ainvoke("go", context="me")
    ok = create_deep_agent(FunctionModel(lambda r: "hi"), context_schema=Plain)
    assert (await ok.ainvoke("go", context=Plain(user_id="p")))["messages"][-1].text == "hi"


def test_a_context_schema_pydantic_cannot_read_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigurationError, match="context_schema"):
        create_deep_agent(FunctionModel(lambda r: "x"), context_schema=object())


async def test_a_run_limit_on_model_calls_ends_the_run_with_a_message() -> None:
    model = looping_model(10)
    agent = create_deep_agent(
        model, tools=[lookup], middleware=[ModelCallLimitMiddleware(run_limit=3)]
    )
    result = await agent.ainvoke("go")
    assert model.calls == 3
    final = result["messages"][-1]
    assert final.stop_reason == "call_limit"
    assert "3 model call(s) allowed (run_limit)" in final.text
    assert result["thread_model_calls"] == 3


async def test_a_thread_limit_on_model_calls_counts_over_runs() -> None:
    model = FunctionModel(lambda r: "answer")
    agent = create_deep_agent(
        model,
        checkpointer=MemoryCheckpointer(),
        middleware=[ModelCallLimitMiddleware(thread_limit=2)],
    )
    for _ in range(2):
        await agent.ainvoke("again", thread_id="t")
    third = await agent.ainvoke("again", thread_id="t")
    assert model.calls == 2
    assert "(thread_limit)" in third["messages"][-1].text


async def test_a_model_call_limit_can_raise_instead() -> None:
    model = looping_model(10)
    agent = create_deep_agent(
        model,
        tools=[lookup],
        middleware=[ModelCallLimitMiddleware(run_limit=2, exit_behavior="error")],
    )
    with pytest.raises(CallLimitExceeded, match="run_limit"):
        await agent.ainvoke("go")
    assert model.calls == 2


async def test_a_tool_call_limit_runs_none_of_a_turn_past_it_and_ends_cleanly() -> None:
    ran: list[str] = []

    async def search(q: str) -> str:
        """Search.

        Args:
            q: The query.
        """
        ran.append(q)
        return "found"

    def answer(request: ModelRequest) -> AssistantMessage:
        n = len(tool_results(request))
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="search", args={"q": f"q{n}"}),
                ToolCall(name="lookup", args={"key": f"k{n}"}),
            ]
        )

    agent = create_deep_agent(
        FunctionModel(answer),
        tools=[search, lookup],
        middleware=[ToolCallLimitMiddleware("search", run_limit=2)],
    )
    result = await agent.ainvoke("go")
    assert ran == ["q0", "q2"]  # the third turn's calls did not run
    messages = result["messages"]
    last_turn = [m for m in messages if isinstance(m, ToolMessage)][-2:]
    assert all(m.status == "error" and m.text.startswith("Not run") for m in last_turn)
    assert messages[-1].stop_reason == "call_limit"
    assert "2 search call(s) (run_limit)" in messages[-1].text
    # Every call has its result, so the thread can go on.
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(answered)


async def test_tool_call_limits_per_tool_and_per_thread_side_by_side() -> None:
    def answer(request: ModelRequest) -> AssistantMessage:
        if request.messages[-1].role == "user":  # one lookup per run
            return AssistantMessage(tool_calls=[ToolCall(name="lookup", args={"key": "k"})])
        return AssistantMessage(content="done")

    limits = [
        ToolCallLimitMiddleware("lookup", thread_limit=2),
        ToolCallLimitMiddleware(run_limit=5, exit_behavior="error"),
    ]
    agent = create_deep_agent(
        FunctionModel(answer), tools=[lookup], middleware=limits, checkpointer=MemoryCheckpointer()
    )
    assert [mw.name for mw in limits] == [
        "ToolCallLimitMiddleware[lookup]",
        "ToolCallLimitMiddleware[*]",
    ]
    first = await agent.ainvoke("go", thread_id="t")
    assert first["thread_tool_calls"] == {"lookup": 1, "*": 1}
    await agent.ainvoke("go", thread_id="t")
    third = await agent.ainvoke("go", thread_id="t")
    assert "(thread_limit)" in third["messages"][-1].text


def test_limits_are_checked_when_built() -> None:
    with pytest.raises(ConfigurationError, match="run_limit="):
        ModelCallLimitMiddleware()
    with pytest.raises(ConfigurationError, match="exit_behavior"):
        ToolCallLimitMiddleware(run_limit=1, exit_behavior="stop")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="thread_limit"):
        ModelCallLimitMiddleware(thread_limit=-1)

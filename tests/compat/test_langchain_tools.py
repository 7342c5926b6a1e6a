"""LangChain tools (``@tool``, ``StructuredTool``, ``BaseTool``) given to deepactors as they are."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage
from langchain_core.messages import ToolMessage as LCToolMessage
from langchain_core.tools import (
    BaseTool,
    InjectedToolArg,
    InjectedToolCallId,
    StructuredTool,
    ToolException,
    tool,
)
from langgraph.prebuilt import InjectedState, InjectedStore
from langgraph.types import Command as LGCommand

from deepactors import AssistantMessage, MemoryStore, ToolCall, create_deep_agent
from deepactors.errors import ConfigurationError
from deepactors.models import ModelRequest, ScriptedModel

pytestmark = pytest.mark.anyio


def calls(*items: ToolCall) -> ScriptedModel:
    """A model that makes ``items`` in one turn, then answers ``done``."""
    return ScriptedModel([AssistantMessage(tool_calls=list(items)), "done"])


def results(result: dict[str, Any]) -> dict[str, Any]:
    return {m.tool_call_id: m for m in result["messages"] if m.role == "tool"}


received: dict[str, Any] = {}


@tool
def lookup(
    query: str,
    user_id: Annotated[str, InjectedToolArg],
    messages: Annotated[list[Any], InjectedState("messages")],
    call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Look something up for the user.

    Args:
        query: What to look up.
    """
    received.update(
        user_id=user_id,
        first=messages[0],
        call_id=call_id,
        thread=threading.get_ident(),
    )
    return f"{query}: found"


async def test_injected_arguments_are_hidden_from_the_model_and_given_to_the_tool() -> None:
    model = calls(ToolCall(id="c1", name="lookup", args={"query": "tea"}))
    agent = create_deep_agent(model=model, tools=[lookup])
    result = await agent.ainvoke(
        {"messages": [HumanMessage(content="find tea")]}, context={"user_id": "u-7"}
    )
    schema = agent.tools["lookup"].parameters
    assert set(schema["properties"]) == {"query"}
    assert schema["required"] == ["query"]
    sent = model.requests[0].tools
    assert [t.parameters for t in sent if t.name == "lookup"] == [schema]
    assert results(result)["c1"].text == "tea: found"
    assert received["user_id"] == "u-7"
    assert received["call_id"] == "c1"
    # The state as LangGraph gives it to a tool: LangChain message objects.
    assert isinstance(received["first"], HumanMessage)
    assert received["first"].content == "find tea"


async def test_a_sync_langchain_tool_runs_off_the_event_loop_thread() -> None:
    agent = create_deep_agent(
        model=calls(ToolCall(id="c1", name="lookup", args={"query": "x"})), tools=[lookup]
    )
    await agent.ainvoke("go", context={"user_id": "u"})
    assert received["thread"] != threading.get_ident()


async def test_async_tool_gets_langgraphs_tool_runtime() -> None:
    seen: dict[str, Any] = {}

    @tool
    async def remember(fact: str, runtime: ToolRuntime) -> str:
        """Remember a fact."""
        seen["call"] = runtime.tool_call_id
        seen["messages"] = len(runtime.state["messages"])
        runtime.stream_writer({"fact": fact})
        return "remembered"

    agent = create_deep_agent(
        model=calls(ToolCall(id="c9", name="remember", args={"fact": "sky"})), tools=[remember]
    )
    assert set(agent.tools["remember"].parameters["properties"]) == {"fact"}
    result = await agent.ainvoke("remember the sky")
    assert results(result)["c9"].text == "remembered"
    assert seen == {"call": "c9", "messages": 2}


async def test_tool_exception_is_an_error_result_the_model_reads() -> None:
    @tool
    def fragile(x: int) -> str:
        """Fails."""
        raise ToolException(f"cannot handle {x}")

    def fail(x: int) -> str:
        raise ToolException("handled failure")

    handled = StructuredTool.from_function(
        func=fail, name="handled", description="Fails, handled.", handle_tool_error=True
    )

    model = calls(
        ToolCall(id="a", name="fragile", args={"x": 3}),
        ToolCall(id="b", name="handled", args={"x": 1}),
        ToolCall(id="c", name="fragile", args={"x": "not a number"}),
    )
    result = await create_deep_agent(model=model, tools=[fragile, handled]).ainvoke("go")
    out = results(result)
    assert (out["a"].status, out["a"].text) == ("error", "cannot handle 3")
    assert (out["b"].status, out["b"].text) == ("error", "handled failure")
    assert out["c"].status == "error"
    assert "x" in out["c"].text


async def test_command_from_a_tool_updates_state() -> None:
    @tool
    def finish(note: str, call_id: Annotated[str, InjectedToolCallId]) -> LGCommand[Any]:
        """Record a note."""
        return LGCommand(
            update={"messages": [LCToolMessage(content=f"noted {note}", tool_call_id=call_id)]}
        )

    result = await create_deep_agent(
        model=calls(ToolCall(id="n1", name="finish", args={"note": "hi"})), tools=[finish]
    ).ainvoke("go")
    assert results(result)["n1"].text == "noted hi"


async def test_structured_and_subclassed_tools_in_a_subagent() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    async def aadd(a: int, b: int) -> int:
        return a + b

    adder = StructuredTool.from_function(func=add, coroutine=aadd, name="adder", description="Add.")

    class Shout(BaseTool):
        name: str = "shout"
        description: str = "Shout the text."

        def _run(self, text: str) -> str:
            return text.upper()

    def model(request: ModelRequest) -> AssistantMessage | str:
        last = request.messages[-1]
        if request.messages[0].text == "sum it":  # the subagent
            if last.role == "tool":
                return "child done: " + " ".join(
                    m.text for m in request.messages if m.role == "tool"
                )
            return AssistantMessage(
                tool_calls=[
                    ToolCall(id="s1", name="adder", args={"a": 2, "b": 3}),
                    ToolCall(id="s2", name="shout", args={"text": "ok"}),
                ]
            )
        if last.role == "tool":
            return last.text
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="task", args={"description": "sum it", "subagent_type": "calculator"})
            ]
        )

    from deepactors.models import FunctionModel

    agent = create_deep_agent(
        model=FunctionModel(model),
        subagents=[
            {
                "name": "calculator",
                "description": "Adds.",
                "system_prompt": "Add.",
                "tools": [adder, Shout()],
            }
        ],
    )
    result = await agent.ainvoke("go")
    assert result["messages"][-1].text == "child done: 5 OK"


def test_a_tool_whose_name_no_model_accepts_is_refused_by_name() -> None:
    @tool("bad name!")
    def bad(x: int) -> int:
        """Bad."""
        return x

    with pytest.raises(ConfigurationError, match="bad name!"):
        create_deep_agent(model=ScriptedModel(["x"]), tools=[bad])


def test_return_direct_is_refused_by_name() -> None:
    @tool(return_direct=True)
    def final(x: int) -> int:
        """Ends the run."""
        return x

    with pytest.raises(ConfigurationError, match="'final' has return_direct"):
        create_deep_agent(model=ScriptedModel(["x"]), tools=[final])


async def test_injected_store_gets_the_agents_store() -> None:
    store = MemoryStore()
    seen: list[Any] = []

    @tool
    def remember(fact: str, store: Annotated[Any, InjectedStore()]) -> str:
        """Remember a fact."""
        seen.append(store)
        return "ok"

    agent = create_deep_agent(
        model=calls(ToolCall(id="s1", name="remember", args={"fact": "f"})),
        tools=[remember],
        store=store,
    )
    assert set(agent.tools["remember"].parameters["properties"]) == {"fact"}
    result = await agent.ainvoke("remember")
    assert results(result)["s1"].text == "ok"
    assert seen == [store]

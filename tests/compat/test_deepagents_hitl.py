"""deepagents' human-in-the-loop integration tests, with only the imports changed.

Source: https://github.com/langchain-ai/deepagents, commit
23b83ad50f63d241d0069a3dc426d43b211adf2e (file last changed in
12928692410a952ca9413f67829ab00b7546ea32),
``libs/deepagents/tests/integration_tests/test_hitl.py``: its tools,
``SAMPLE_TOOL_CONFIG``, ``_all_tool_calls`` and the three tests
(``test_hitl_agent``, ``test_subagent_with_hitl``,
``test_subagent_with_custom_interrupt_on``) verbatim. Ours: the import lines, and
``_model()``, which upstream is ``init_chat_model("claude-sonnet-4-6")`` and here a
deterministic LangChain chat model that does what the prompts ask (delegate with
``task`` when told to, else call the three tools in parallel, then answer); and
the fixture running each test on both event loops.
"""

# ruff: noqa: E501

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

# --- the changed import lines -------------------------------------------------------
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command  # upstream's line: LangGraph's Command resumes too

from deepactors import MemoryCheckpointer as MemorySaver
from deepactors.langchain import create_deep_agent as _create_deep_agent
from tests.compat.lc_fakes import RuleChatModel

# ------------------------------------------------------------------------------------

create_deep_agent: Any = _create_deep_agent


@pytest.fixture(autouse=True, params=["asyncio", "trio"])
def sync_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test twice: the agents' sync invoke on asyncio, then on trio."""
    global create_deep_agent

    def on_loop(*args: Any, **kwargs: Any) -> Any:
        return _create_deep_agent(*args, **kwargs).on_loop(request.param)

    create_deep_agent = on_loop
    yield request.param
    create_deep_agent = _create_deep_agent


def _follow_the_prompt(messages: list[BaseMessage]) -> AIMessage:
    """What a capable model does with these tests' prompts (ours, not upstream's)."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content="All done.")
    request = next(m for m in messages if isinstance(m, HumanMessage)).text
    if request.startswith("Use the task tool"):
        subagent = request.split("kick off the ", 1)[1].split(" ", 1)[0]
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "task",
                    "args": {
                        "description": "Call the sample tool, get the weather in New York "
                        "and get scores for the latest soccer games in parallel",
                        "subagent_type": subagent,
                    },
                    "id": f"call_task_{uuid.uuid4().hex[:8]}",
                    "type": "tool_call",
                }
            ],
        )
    calls = [
        ("sample_tool", {"sample_input": "sample"}),
        ("get_weather", {"location": "New York"}),
        ("get_soccer_scores", {"team": "Arsenal"}),
    ]
    return AIMessage(
        content="",
        tool_calls=[
            {"name": n, "args": a, "id": f"call_{n}_{uuid.uuid4().hex[:8]}", "type": "tool_call"}
            for n, a in calls
        ],
    )


def _model():
    return RuleChatModel(_follow_the_prompt)


# --- upstream, verbatim ---------------------------------------------------------------


@tool(description="Use this tool to get the weather")
def get_weather(location: str) -> str:
    return f"The weather in {location} is sunny."


@tool(description="Use this tool to get the latest soccer scores")
def get_soccer_scores(team: str) -> str:
    return f"The latest soccer scores for {team} are 2-1."


@tool(description="Sample tool")
def sample_tool(sample_input: str) -> str:
    return sample_input


SAMPLE_TOOL_CONFIG = {
    "sample_tool": True,
    "get_weather": False,
    "get_soccer_scores": {"allowed_decisions": ["approve", "reject"]},
}


def _all_tool_calls(messages: list) -> list[dict]:
    calls: list[dict] = []
    for msg in messages:
        if isinstance(msg, AIMessage):
            calls.extend(msg.tool_calls or [])
    return calls


def test_hitl_agent() -> None:
    """Top-level `interrupt_on` pauses the graph and exposes the right review configs."""
    checkpointer = MemorySaver()
    agent = create_deep_agent(
        model=_model(),
        tools=[sample_tool, get_weather, get_soccer_scores],
        interrupt_on=SAMPLE_TOOL_CONFIG,
        checkpointer=checkpointer,
    )

    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    query = "Call the sample tool, get the weather in New York and get scores for the latest soccer games in parallel"

    agent.invoke({"messages": [{"role": "user", "content": query}]}, config=config)

    state = agent.get_state(config)

    tool_calls = _all_tool_calls(state.values.get("messages", []))
    assert any(tc["name"] == "sample_tool" for tc in tool_calls)
    assert any(tc["name"] == "get_weather" for tc in tool_calls)
    assert any(tc["name"] == "get_soccer_scores" for tc in tool_calls)

    assert state.interrupts is not None
    assert len(state.interrupts) > 0
    interrupt_value = state.interrupts[0].value
    action_requests = interrupt_value["action_requests"]
    assert len(action_requests) == 2
    assert any(ar["name"] == "sample_tool" for ar in action_requests)
    assert any(ar["name"] == "get_soccer_scores" for ar in action_requests)
    review_configs = interrupt_value["review_configs"]
    assert any(
        rc["action_name"] == "sample_tool"
        and rc["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
        for rc in review_configs
    )
    assert any(
        rc["action_name"] == "get_soccer_scores"
        and rc["allowed_decisions"] == ["approve", "reject"]
        for rc in review_configs
    )

    result = agent.invoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}),
        config=config,
    )

    tool_results = [msg for msg in result.get("messages", []) if msg.type == "tool"]
    assert any(tr.name == "sample_tool" for tr in tool_results)
    assert any(tr.name == "get_weather" for tr in tool_results)
    assert any(tr.name == "get_soccer_scores" for tr in tool_results)


def test_subagent_with_hitl() -> None:
    """Subagent (general-purpose) inherits parent's `interrupt_on` and triggers approval."""
    checkpointer = MemorySaver()
    agent = create_deep_agent(
        model=_model(),
        tools=[sample_tool, get_weather, get_soccer_scores],
        interrupt_on=SAMPLE_TOOL_CONFIG,
        checkpointer=checkpointer,
    )

    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    query = (
        "Use the task tool to kick off the general-purpose subagent. "
        "Tell it to call the sample tool, get the weather in New York "
        "and get scores for the latest soccer games in parallel"
    )

    agent.invoke({"messages": [{"role": "user", "content": query}]}, config=config)

    state = agent.get_state(config)

    assert state.interrupts is not None
    assert len(state.interrupts) > 0
    interrupt_value = state.interrupts[0].value
    action_requests = interrupt_value["action_requests"]
    assert len(action_requests) == 2
    assert any(ar["name"] == "sample_tool" for ar in action_requests)
    assert any(ar["name"] == "get_soccer_scores" for ar in action_requests)
    review_configs = interrupt_value["review_configs"]
    assert any(
        rc["action_name"] == "sample_tool"
        and rc["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
        for rc in review_configs
    )
    assert any(
        rc["action_name"] == "get_soccer_scores"
        and rc["allowed_decisions"] == ["approve", "reject"]
        for rc in review_configs
    )

    agent.invoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}),
        config=config,
    )

    state_after = agent.get_state(config)
    assert len(state_after.interrupts) == 0


def test_subagent_with_custom_interrupt_on() -> None:
    """Declarative subagent overrides parent's `interrupt_on` with its own config."""
    checkpointer = MemorySaver()
    agent = create_deep_agent(
        model=_model(),
        tools=[sample_tool, get_weather, get_soccer_scores],
        interrupt_on=SAMPLE_TOOL_CONFIG,
        checkpointer=checkpointer,
        subagents=[
            {
                "name": "task_handler",
                "description": "A subagent that can handle all sorts of tasks",
                "system_prompt": "You are a task handler. You can handle all sorts of tasks.",
                "tools": [sample_tool, get_weather, get_soccer_scores],
                "interrupt_on": {
                    "sample_tool": False,
                    "get_weather": True,
                    "get_soccer_scores": True,
                },
            },
        ],
    )

    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    query = (
        "Use the task tool to kick off the task_handler subagent. "
        "Tell it to call the sample tool, get the weather in New York "
        "and get scores for the latest soccer games in parallel"
    )

    agent.invoke({"messages": [{"role": "user", "content": query}]}, config=config)

    state = agent.get_state(config)

    assert state.interrupts is not None
    assert len(state.interrupts) > 0
    interrupt_value = state.interrupts[0].value
    action_requests = interrupt_value["action_requests"]
    assert len(action_requests) == 2
    assert any(ar["name"] == "get_weather" for ar in action_requests)
    assert any(ar["name"] == "get_soccer_scores" for ar in action_requests)
    # `sample_tool` is disabled in the subagent config; should not be in interrupt
    assert not any(ar["name"] == "sample_tool" for ar in action_requests)

    review_configs = interrupt_value["review_configs"]
    assert any(
        rc["action_name"] == "get_weather"
        and rc["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
        for rc in review_configs
    )
    assert any(
        rc["action_name"] == "get_soccer_scores"
        and rc["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
        for rc in review_configs
    )

    agent.invoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}),
        config=config,
    )

    state_after = agent.get_state(config)
    assert len(state_after.interrupts) == 0

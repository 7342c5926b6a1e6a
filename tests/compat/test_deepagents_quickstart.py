"""deepagents' README examples, ported by changing only the import lines.

The bodies below are deepagents' quickstart, human-in-the-loop and checkpointer
examples as its README writes them; only the imports differ (and a
``FunctionModel`` stands in for the real model, as the brief allows).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import pytest

# --- the changed import lines -------------------------------------------------------
# ------------------------------------------------------------------------------------
from deepactors import AssistantMessage, Command, ToolCall, ToolMessage, create_deep_agent
from deepactors import MemoryCheckpointer as MemorySaver
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def research_model() -> FunctionModel:
    """Searches once, delegates once, then answers (the model is the only stand-in)."""

    def answer(request: ModelRequest) -> AssistantMessage:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if request.messages[0].text.startswith("Research"):  # the subagent
            return AssistantMessage(content="LangGraph is a library for agent graphs.")
        if not results:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="internet_search", args={"query": "what is langgraph"}),
                ]
            )
        if len(results) == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(
                        name="task",
                        args={
                            "description": "Research LangGraph in depth",
                            "subagent_type": "research-agent",
                        },
                    )
                ]
            )
        return AssistantMessage(content=f"LangGraph: {results[-1].text}")

    return FunctionModel(answer)


searches: list[str] = []


def internet_search(
    query: str,
    max_results: int = 5,
    topic: Literal["general", "news", "finance"] = "general",
    include_raw_content: bool = False,
) -> dict[str, Any]:
    """Run a web search"""
    searches.append(query)
    return {"results": [{"title": "LangGraph", "content": "agent graphs"}]}


research_instructions = """You are an expert researcher. Your job is to conduct thorough research and then write a polished report.

You have access to an internet search tool as your primary means of gathering information.
"""  # noqa: E501 - deepagents' text, as written

research_subagent = {
    "name": "research-agent",
    "description": "Used to research more in depth questions",
    "system_prompt": "You are a great researcher",
    "tools": [internet_search],
}


async def test_the_quickstart_research_agent_runs_as_written() -> None:
    model = research_model()
    agent = create_deep_agent(
        model=model,
        tools=[internet_search],
        system_prompt=research_instructions,
        subagents=[research_subagent],
    )
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "What is langgraph?"}]})
    assert result["messages"][-1].content == "LangGraph: LangGraph is a library for agent graphs."
    assert result["messages"][0].type == "human"
    assert result["messages"][-1].type == "ai"


def test_the_quickstart_runs_through_the_sync_api() -> None:
    agent = create_deep_agent(
        model=research_model(), tools=[internet_search], subagents=[research_subagent]
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "What is langgraph?"}]})
    # Print the agent's response
    print(result["messages"][-1].content)
    result["messages"][-1].pretty_print()
    assert "LangGraph" in result["messages"][-1].content


def delete_file(path: str) -> str:
    """Delete a file from the filesystem."""
    return f"Deleted {path}"


def read_file_tool(path: str) -> str:
    """Read a file from the filesystem."""
    return f"Contents of {path}"


def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return f"Sent email to {to}"


def hitl_model() -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="delete_file", args={"path": "temp.txt"}),
                    ToolCall(name="send_email", args={"to": "a@b.c", "subject": "s", "body": "b"}),
                ]
            )
        return AssistantMessage(
            content="done: "
            + "; ".join(m.text for m in request.messages if isinstance(m, ToolMessage))
        )

    return FunctionModel(answer)


async def test_the_human_in_the_loop_example_runs_as_written() -> None:
    # Checkpointer is REQUIRED for human-in-the-loop
    checkpointer = MemorySaver()

    agent = create_deep_agent(
        model=hitl_model(),
        tools=[delete_file, read_file_tool, send_email],
        interrupt_on={
            "delete_file": True,  # Default: approve, edit, reject
            "read_file_tool": False,  # No interrupts needed
            "send_email": {"allowed_decisions": ["approve", "reject"]},  # No editing
        },
        checkpointer=checkpointer,
    )

    # Create config with thread_id for state persistence
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}

    # Invoke the agent
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Delete the file temp.txt"}]}, config=config
    )

    # Check if execution was interrupted
    assert result.get("__interrupt__")
    # Extract interrupt information
    interrupts = result["__interrupt__"][0].value
    action_requests = interrupts["action_requests"]
    review_configs = interrupts["review_configs"]

    # Create a lookup map from tool name to review config
    config_map = {cfg["action_name"]: cfg for cfg in review_configs}

    # Display the pending actions to the user
    for action in action_requests:
        review_config = config_map[action["name"]]
        print(f"Tool: {action['name']}")
        print(f"Arguments: {action['args']}")
        print(f"Allowed decisions: {review_config['allowed_decisions']}")
    assert [a["name"] for a in action_requests] == ["delete_file", "send_email"]
    assert config_map["send_email"]["allowed_decisions"] == ["approve", "reject"]

    # Get user decisions (one per action_request, in order)
    decisions = [
        {"type": "approve"},  # User approved the deletion
        {"type": "reject", "message": "no emails today"},
    ]

    # Resume execution with decisions
    result = await agent.ainvoke(
        Command(resume={"decisions": decisions}),
        config=config,  # Must use the same config!
    )

    # Process final result
    print(result["messages"][-1].content)
    assert "Deleted temp.txt" in result["messages"][-1].content
    assert "no emails today" in result["messages"][-1].content
    assert "__interrupt__" not in result


async def test_the_edit_and_respond_decisions_of_deepagents_work() -> None:
    agent = create_deep_agent(
        model=hitl_model(),
        tools=[delete_file, send_email],
        interrupt_on={"delete_file": True, "send_email": True},
        checkpointer=MemorySaver(),
    )
    config = {"configurable": {"thread_id": "edit"}}
    await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config=config)
    decisions = [
        {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "other.txt"}}},
        {"type": "respond", "message": "I sent it myself."},
    ]
    result = await agent.ainvoke(Command(resume={"decisions": decisions}), config=config)
    assert "Deleted other.txt" in result["messages"][-1].content
    assert "I sent it myself." in result["messages"][-1].content


async def test_the_checkpointer_example_continues_a_conversation() -> None:
    def answer(request: ModelRequest) -> str:
        return f"I have seen {len(request.messages)} message(s)"

    agent = create_deep_agent(model=FunctionModel(answer), checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "1"}}
    await agent.ainvoke({"messages": [("user", "hi, I'm Bob")]}, config)
    result = await agent.ainvoke({"messages": [{"type": "human", "content": "who am I?"}]}, config)
    assert result["messages"][-1].content == "I have seen 3 message(s)"
    state = await agent.aget_state(config)
    assert [m.type for m in state.values["messages"]] == ["human", "ai", "human", "ai"]
    assert state.next == ()
    assert state.config["configurable"]["thread_id"] == "1"
    history = await agent.aget_state_history(config)
    assert [len(s.values["messages"]) for s in history] == [4, 3, 2, 1]


async def test_the_streaming_examples_run_as_written() -> None:
    agent = create_deep_agent(
        model=research_model(), tools=[internet_search], subagents=[research_subagent]
    )
    inputs = {"messages": [{"role": "user", "content": "What is langgraph?"}]}

    seen = []
    async for chunk in agent.astream(inputs, stream_mode="values"):
        if "messages" in chunk:
            chunk["messages"][-1].pretty_print()
            seen.append(chunk["messages"][-1].type)
    assert seen[0] == "human"
    assert seen[-1] == "ai"

    namespaces = set()
    async for namespace, chunk in agent.astream(inputs, stream_mode="updates", subgraphs=True):
        namespaces.add(namespace)
        assert set(chunk) <= {"model", "tools", "middleware"}
    assert () in namespaces
    assert ("task-1:research-agent",) in namespaces

    tokens = []
    async for token, metadata in agent.astream(inputs, stream_mode="messages"):
        if token.type == "ai" and token.content:
            tokens.append(token.content)
        assert metadata["langgraph_node"] in ("model", "tools")
    assert "".join(tokens).endswith("LangGraph is a library for agent graphs.")

    modes = set()
    async for mode, chunk in agent.astream(inputs, stream_mode=["updates", "values"]):
        modes.add(mode)
        assert isinstance(chunk, dict)
    assert modes == {"updates", "values"}


def test_streaming_through_the_sync_api() -> None:
    agent = create_deep_agent(model=research_model(), tools=[internet_search])
    inputs = {"messages": [{"role": "user", "content": "What is langgraph?"}]}
    last = None
    for chunk in agent.stream(inputs, stream_mode="values"):
        last = chunk["messages"][-1]
    assert last is not None
    assert last.type == "ai"


def test_an_unknown_stream_mode_is_refused_by_name() -> None:
    from deepactors import InputError

    agent = create_deep_agent(model=research_model())
    with pytest.raises(InputError, match="unknown stream mode 'valuez'"):
        agent.astream("hi", stream_mode="valuez")

"""deepagents' subagent tests, run against deepactors with only the imports changed.

Source: https://github.com/langchain-ai/deepagents, commit
23b83ad50f63d241d0069a3dc426d43b211adf2e (file last changed in
a4662c07296c378045006c9f45ed1d12bd1a9da6),
``libs/deepagents/tests/unit_tests/test_subagents.py``, class ``TestSubAgents``:

* ``test_subagent_returns_final_message_as_tool_result`` (lines 130-211)
* ``test_multiple_subagents_invoked_in_parallel`` (213-330)
* ``test_agent_with_structured_output_tool_strategy`` (596-660)
* ``test_parallel_subagents_with_todo_lists`` (662-869)
* ``test_subagent_inherits_interrupt_on_from_parent_agent`` (1059-1136)
* ``test_subagent_interrupt_on_override_disables_parent_interrupt`` (1138-1214)
* ``test_subagent_streaming_emits_messages_and_updates_from_subgraph`` (1794-1886)

The method bodies below are copied verbatim (``ruff format`` only re-wraps their
long lines). Everything above the class is ours: the import lines, and the
fixture that runs each test on both event loops. LangChain's and LangGraph's
import lines are upstream's, unchanged (``TodoListMiddleware``, ``ToolStrategy``,
``InMemorySaver``, the messages and ``@tool``); only deepagents' own and
LangChain's ``create_agent`` changed, to deepactors'. ``GenericFakeChatModel`` is our deterministic fake
(``tests/compat/lc_fakes.py``), standing in for deepagents' test helper of that
name. LangChain's ``create_agent`` is deepactors' ``create_deep_agent``: a
prebuilt agent given as a ``CompiledSubAgent`` runnable.
"""

# ruff: noqa: E501

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

# --- upstream's LangChain and LangGraph import lines, unchanged ----------------------
from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field

# --- the changed import lines: deepagents' own, and create_agent --------------------
from deepactors.langchain import CompiledSubAgent
from deepactors.langchain import create_deep_agent as _create_deep_agent
from tests.compat.lc_fakes import GenericFakeChatModel

# ------------------------------------------------------------------------------------

create_deep_agent: Any = _create_deep_agent
create_agent: Any = _create_deep_agent


@pytest.fixture(autouse=True, params=["asyncio", "trio"])
def sync_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test twice: the agents' sync invoke/stream on asyncio, then on trio."""
    global create_deep_agent, create_agent

    def on_loop(*args: Any, **kwargs: Any) -> Any:
        return _create_deep_agent(*args, **kwargs).on_loop(request.param)

    create_deep_agent = create_agent = on_loop
    yield request.param
    create_deep_agent = create_agent = _create_deep_agent


class TestSubAgents:
    """Tests for sub-agent middleware functionality (deepagents' bodies, verbatim)."""

    def test_subagent_returns_final_message_as_tool_result(self) -> None:
        """Test that a subagent's final message is returned as a ToolMessage.

        This test verifies the core subagent functionality:
        1. Parent agent invokes the 'task' tool to launch a subagent
        2. Subagent executes and returns a result
        3. The subagent's final message is extracted and returned to the parent
           as a ToolMessage in the parent's message list
        4. Only the final message content is included (not the full conversation)

        The response flow is:
        - Parent receives ToolMessage with content from subagent's last AIMessage
        - State updates (excluding messages/todos/structured_response) are merged
        - Parent can then process the subagent's response and continue
        """
        # Create the parent agent's chat model that will call the subagent
        parent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    # First response: invoke the task tool to launch subagent
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "task",
                                "args": {
                                    "description": "Calculate the sum of 2 and 3",
                                    "subagent_type": "general-purpose",
                                },
                                "id": "call_calculate_sum",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    # Second response: acknowledge the subagent's result
                    AIMessage(content="The calculation has been completed."),
                ]
            )
        )

        # Create the subagent's chat model that will handle the calculation
        subagent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(content="The sum of 2 and 3 is 5."),
                ]
            )
        )

        # Create the compiled subagent
        compiled_subagent = create_agent(model=subagent_chat_model)

        # Create the parent agent with subagent support
        parent_agent = create_deep_agent(
            model=parent_chat_model,
            checkpointer=InMemorySaver(),
            subagents=[
                CompiledSubAgent(
                    name="general-purpose",
                    description="A general-purpose agent for various tasks.",
                    runnable=compiled_subagent,
                )
            ],
        )

        # Invoke the parent agent with an initial message
        result = parent_agent.invoke(
            {"messages": [HumanMessage(content="What is 2 + 3?")]},
            config={"configurable": {"thread_id": "test_thread_calculation"}},
        )

        # Verify the result contains messages
        assert "messages" in result, "Result should contain messages key"
        assert len(result["messages"]) > 0, "Result should have at least one message"

        # Find the ToolMessage that contains the subagent's response
        tool_messages = [msg for msg in result["messages"] if msg.type == "tool"]
        assert len(tool_messages) > 0, "Should have at least one ToolMessage from subagent"

        # Verify the ToolMessage contains the subagent's final response
        subagent_tool_message = tool_messages[0]
        assert "The sum of 2 and 3 is 5." in subagent_tool_message.content, (
            "ToolMessage should contain subagent's final message content"
        )

    def test_multiple_subagents_invoked_in_parallel(self) -> None:
        """Test that multiple different subagents can be launched in parallel.

        This test verifies parallel execution with distinct subagent types:
        1. Parent agent makes a single AIMessage with multiple tool_calls
        2. Two different subagents are invoked concurrently (math-adder and math-multiplier)
        3. Each specialized subagent completes its task independently
        4. Both subagent results are returned as separate ToolMessages
        5. Parent agent receives both results and can synthesize them

        The parallel execution pattern is important for:
        - Reducing latency when tasks are independent
        - Efficient resource utilization
        - Handling multi-part user requests with specialized agents
        """
        # Create the parent agent's chat model that will call both subagents in parallel
        parent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    # First response: invoke TWO different task tools in parallel
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "task",
                                "args": {
                                    "description": "Calculate the sum of 5 and 7",
                                    "subagent_type": "math-adder",
                                },
                                "id": "call_addition",
                                "type": "tool_call",
                            },
                            {
                                "name": "task",
                                "args": {
                                    "description": "Calculate the product of 4 and 6",
                                    "subagent_type": "math-multiplier",
                                },
                                "id": "call_multiplication",
                                "type": "tool_call",
                            },
                        ],
                    ),
                    # Second response: acknowledge both results
                    AIMessage(content="Both calculations completed successfully."),
                ]
            )
        )

        # Create specialized subagent models - each handles a specific math operation
        addition_subagent_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(content="The sum of 5 and 7 is 12."),
                ]
            )
        )

        multiplication_subagent_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(content="The product of 4 and 6 is 24."),
                ]
            )
        )

        # Compile the two different specialized subagents
        addition_subagent = create_agent(model=addition_subagent_model)
        multiplication_subagent = create_agent(model=multiplication_subagent_model)

        # Create the parent agent with BOTH specialized subagents
        parent_agent = create_deep_agent(
            model=parent_chat_model,
            checkpointer=InMemorySaver(),
            subagents=[
                CompiledSubAgent(
                    name="math-adder",
                    description="Specialized agent for addition operations.",
                    runnable=addition_subagent,
                ),
                CompiledSubAgent(
                    name="math-multiplier",
                    description="Specialized agent for multiplication operations.",
                    runnable=multiplication_subagent,
                ),
            ],
        )

        # Invoke the parent agent with a request that triggers parallel subagent calls
        result = parent_agent.invoke(
            {"messages": [HumanMessage(content="What is 5+7 and what is 4*6?")]},
            config={"configurable": {"thread_id": "test_thread_parallel"}},
        )

        # Verify the result contains messages
        assert "messages" in result, "Result should contain messages key"

        # Find all ToolMessages - should have one for each subagent invocation
        tool_messages = [msg for msg in result["messages"] if msg.type == "tool"]
        assert len(tool_messages) == 2, (
            f"Should have exactly 2 ToolMessages (one per subagent), but got {len(tool_messages)}"
        )

        # Create a lookup map from tool_call_id to ToolMessage for precise verification
        tool_messages_by_id = {msg.tool_call_id: msg for msg in tool_messages}

        # Verify we have both expected tool call IDs
        assert "call_addition" in tool_messages_by_id, "Should have response from addition subagent"
        assert "call_multiplication" in tool_messages_by_id, (
            "Should have response from multiplication subagent"
        )

        # Verify the exact content of each response by looking up the specific tool message
        addition_tool_message = tool_messages_by_id["call_addition"]
        assert addition_tool_message.content == "The sum of 5 and 7 is 12.", (
            f"Addition subagent should return exact message, got: {addition_tool_message.content}"
        )

        multiplication_tool_message = tool_messages_by_id["call_multiplication"]
        assert multiplication_tool_message.content == "The product of 4 and 6 is 24.", (
            f"Multiplication subagent should return exact message, got: {multiplication_tool_message.content}"
        )

    def test_agent_with_structured_output_tool_strategy(self) -> None:
        """Test that an agent with ToolStrategy properly generates structured output.

        This test verifies the structured output setup:
        1. Define a Pydantic model as the response schema
        2. Configure agent with ToolStrategy for structured output
        3. Fake model calls the structured output tool
        4. Agent validates and returns the structured response
        5. The structured_response key contains the validated Pydantic instance

        This validates our understanding of how to set up structured output
        correctly using the fake model for testing.
        """

        # Define the Pydantic model for structured output
        class WeatherReport(BaseModel):
            """Structured weather information."""

            location: str = Field(description="The city or location for the weather report")
            temperature: float = Field(description="Temperature in Celsius")
            condition: str = Field(description="Weather condition (e.g., sunny, rainy)")

        # Create a fake model that calls the structured output tool
        # The tool name will be the schema class name: "WeatherReport"
        fake_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "WeatherReport",
                                "args": {
                                    "location": "San Francisco",
                                    "temperature": 18.5,
                                    "condition": "sunny",
                                },
                                "id": "call_weather_report",
                                "type": "tool_call",
                            }
                        ],
                    ),
                ]
            )
        )

        # Create agent with ToolStrategy for structured output
        agent = create_agent(
            model=fake_model,
            response_format=ToolStrategy(schema=WeatherReport),
        )

        # Invoke the agent
        result = agent.invoke(
            {"messages": [HumanMessage(content="What's the weather in San Francisco?")]}
        )

        # Verify the structured_response key exists in the result
        assert "structured_response" in result, "Result should contain structured_response key"

        # Verify the structured response is the correct type
        structured_response = result["structured_response"]
        assert isinstance(structured_response, WeatherReport), (
            f"Expected WeatherReport instance, got {type(structured_response)}"
        )

        # Verify the structured response has the correct values
        expected_response = WeatherReport(
            location="San Francisco", temperature=18.5, condition="sunny"
        )
        assert structured_response == expected_response, (
            f"Expected {expected_response}, got {structured_response}"
        )

    def test_parallel_subagents_with_todo_lists(self) -> None:
        """Test that multiple subagents can manage their own isolated todo lists.

        This test verifies that:
        1. Multiple subagents can be invoked in parallel
        2. Each subagent can use write_todos to manage its own todo list
        3. Todo lists are properly isolated to each subagent (not merged into parent)
        4. Parent receives clean ToolMessages from each subagent
        5. The 'todos' key is excluded from parent state per _EXCLUDED_STATE_KEYS

        This validates that todo list state isolation works correctly in parallel execution.
        """
        # Create parent agent's chat model that calls two subagents in parallel
        parent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    # First response: invoke TWO subagents in parallel
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "task",
                                "args": {
                                    "description": "Research the history of Python programming language",
                                    "subagent_type": "python-researcher",
                                },
                                "id": "call_research_python",
                                "type": "tool_call",
                            },
                            {
                                "name": "task",
                                "args": {
                                    "description": "Research the history of JavaScript programming language",
                                    "subagent_type": "javascript-researcher",
                                },
                                "id": "call_research_javascript",
                                "type": "tool_call",
                            },
                        ],
                    ),
                    # Second response: acknowledge both results
                    AIMessage(content="Both research tasks completed successfully."),
                ]
            )
        )

        # Create first subagent that uses write_todos and returns a result
        python_subagent_model = GenericFakeChatModel(
            messages=iter(
                [
                    # First: write some todos
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "write_todos",
                                "args": {
                                    "todos": [
                                        {
                                            "content": "Search for Python history",
                                            "status": "in_progress",
                                            "activeForm": "Searching for Python history",
                                        },
                                        {
                                            "content": "Summarize findings",
                                            "status": "pending",
                                            "activeForm": "Summarizing findings",
                                        },
                                    ]
                                },
                                "id": "call_write_todos_python_1",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    # Second: update todos and return final message
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "write_todos",
                                "args": {
                                    "todos": [
                                        {
                                            "content": "Search for Python history",
                                            "status": "completed",
                                            "activeForm": "Searching for Python history",
                                        },
                                        {
                                            "content": "Summarize findings",
                                            "status": "completed",
                                            "activeForm": "Summarizing findings",
                                        },
                                    ]
                                },
                                "id": "call_write_todos_python_2",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    # Final result message
                    AIMessage(
                        content="Python was created by Guido van Rossum and released in 1991."
                    ),
                ]
            )
        )

        # Create second subagent that uses write_todos and returns a result
        javascript_subagent_model = GenericFakeChatModel(
            messages=iter(
                [
                    # First: write some todos
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "write_todos",
                                "args": {
                                    "todos": [
                                        {
                                            "content": "Search for JavaScript history",
                                            "status": "in_progress",
                                            "activeForm": "Searching for JavaScript history",
                                        },
                                        {
                                            "content": "Compile summary",
                                            "status": "pending",
                                            "activeForm": "Compiling summary",
                                        },
                                    ]
                                },
                                "id": "call_write_todos_js_1",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    # Second: update todos and return final message
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "write_todos",
                                "args": {
                                    "todos": [
                                        {
                                            "content": "Search for JavaScript history",
                                            "status": "completed",
                                            "activeForm": "Searching for JavaScript history",
                                        },
                                        {
                                            "content": "Compile summary",
                                            "status": "completed",
                                            "activeForm": "Compiling summary",
                                        },
                                    ]
                                },
                                "id": "call_write_todos_js_2",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    # Final result message
                    AIMessage(
                        content="JavaScript was created by Brendan Eich at Netscape in 1995."
                    ),
                ]
            )
        )

        python_research_agent = create_agent(
            model=python_subagent_model,
            middleware=[TodoListMiddleware()],
        )

        javascript_research_agent = create_agent(
            model=javascript_subagent_model,
            middleware=[TodoListMiddleware()],
        )

        # Create parent agent with both specialized subagents
        parent_agent = create_deep_agent(
            model=parent_chat_model,
            checkpointer=InMemorySaver(),
            subagents=[
                CompiledSubAgent(
                    name="python-researcher",
                    description="Agent specialized in Python research.",
                    runnable=python_research_agent,
                ),
                CompiledSubAgent(
                    name="javascript-researcher",
                    description="Agent specialized in JavaScript research.",
                    runnable=javascript_research_agent,
                ),
            ],
        )

        # Invoke the parent agent
        result = parent_agent.invoke(
            {"messages": [HumanMessage(content="Research Python and JavaScript history")]},
            config={"configurable": {"thread_id": "test_thread_todos"}},
        )

        # Verify the result contains messages
        assert "messages" in result, "Result should contain messages key"

        # Find all ToolMessages from the subagents
        tool_messages = [msg for msg in result["messages"] if msg.type == "tool"]
        assert len(tool_messages) == 2, (
            f"Should have exactly 2 ToolMessages, got {len(tool_messages)}"
        )

        # Create lookup map by tool_call_id
        tool_messages_by_id = {msg.tool_call_id: msg for msg in tool_messages}

        # Verify both expected tool call IDs are present
        assert "call_research_python" in tool_messages_by_id, (
            "Should have response from Python researcher"
        )
        assert "call_research_javascript" in tool_messages_by_id, (
            "Should have response from JavaScript researcher"
        )

        # Verify that todos are NOT in the parent agent's final state
        # (they should be excluded per _EXCLUDED_STATE_KEYS)
        assert "todos" not in result, (
            "Parent agent state should not contain todos key (it should be excluded per _EXCLUDED_STATE_KEYS)"
        )

        # Verify the final messages contain the research results
        python_tool_message = tool_messages_by_id["call_research_python"]
        assert "Python was created by Guido van Rossum" in python_tool_message.content, (
            f"Expected Python research result in message, got: {python_tool_message.content}"
        )

        javascript_tool_message = tool_messages_by_id["call_research_javascript"]
        assert "JavaScript was created by Brendan Eich" in javascript_tool_message.content, (
            f"Expected JavaScript research result in message, got: {javascript_tool_message.content}"
        )

    def test_subagent_inherits_interrupt_on_from_parent_agent(self) -> None:
        interrupt_payloads: list[Any] = []

        @tool
        def requires_approval() -> str:
            """A tool that should trigger HITL."""
            return "approved"

        parent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "task",
                                "args": {
                                    "description": "Use the approval-gated tool.",
                                    "subagent_type": "specialist",
                                },
                                "id": "call_interrupt_inherited",
                                "type": "tool_call",
                            }
                        ],
                    )
                ]
            )
        )

        subagent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "requires_approval",
                                "args": {},
                                "id": "call_requires_approval",
                                "type": "tool_call",
                            }
                        ],
                    )
                ]
            )
        )

        parent_agent = create_deep_agent(
            model=parent_chat_model,
            checkpointer=InMemorySaver(),
            interrupt_on={"requires_approval": True},
            subagents=[
                {
                    "name": "specialist",
                    "description": "Uses an approval-gated tool.",
                    "system_prompt": "Use the approval-gated tool.",
                    "model": subagent_chat_model,
                    "tools": [requires_approval],
                }
            ],
        )

        for chunk in parent_agent.stream(
            {"messages": [HumanMessage(content="Delegate to the specialist.")]},
            config={"configurable": {"thread_id": str(uuid.uuid4())}},
            stream_mode="updates",
        ):
            if "__interrupt__" in chunk:
                interrupt_payloads.extend(chunk["__interrupt__"])

        assert len(interrupt_payloads) == 1
        interrupt_value = interrupt_payloads[0].value
        assert len(interrupt_value["action_requests"]) == 1
        action_request = interrupt_value["action_requests"][0]
        assert action_request["name"] == "requires_approval"
        assert action_request["args"] == {}
        assert "requires_approval" in action_request["description"]
        assert interrupt_value["review_configs"][0]["action_name"] == "requires_approval"

    def test_subagent_interrupt_on_override_disables_parent_interrupt(self) -> None:
        called = False

        @tool
        def requires_approval() -> str:
            """A tool that should not trigger HITL when overridden."""
            nonlocal called
            called = True
            return "approved"

        parent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "task",
                                "args": {
                                    "description": "Use the approval-gated tool.",
                                    "subagent_type": "specialist",
                                },
                                "id": "call_interrupt_override",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    AIMessage(content="done"),
                ]
            )
        )

        subagent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "requires_approval",
                                "args": {},
                                "id": "call_requires_approval_override",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    AIMessage(content="tool completed"),
                ]
            )
        )

        parent_agent = create_deep_agent(
            model=parent_chat_model,
            checkpointer=InMemorySaver(),
            interrupt_on={"requires_approval": True},
            subagents=[
                {
                    "name": "specialist",
                    "description": "Uses an approval-gated tool.",
                    "system_prompt": "Use the approval-gated tool.",
                    "model": subagent_chat_model,
                    "tools": [requires_approval],
                    "interrupt_on": {"requires_approval": False},
                }
            ],
        )

        result = parent_agent.invoke(
            {"messages": [HumanMessage(content="Delegate to the specialist.")]},
            config={"configurable": {"thread_id": str(uuid.uuid4())}},
        )

        assert called is True
        assert "__interrupt__" not in result
        tool_messages = [msg for msg in result["messages"] if msg.type == "tool"]
        assert len(tool_messages) == 1
        assert tool_messages[0].content == "tool completed"

    def test_subagent_streaming_emits_messages_and_updates_from_subgraph(self) -> None:
        """Test end-to-end subagent streaming with `subgraphs=True`.

        Verifies:
        1. Parent and subagent message chunks are both streamed in `messages` mode.
        2. Parent and subagent completed messages are both streamed in `updates` mode.
        3. Subagent message metadata includes its `lc_agent_name`, inherited tags, and config metadata.
        4. The subagent's tool result is surfaced back through the parent tools update.
        """
        parent_content = "PARENT_RESPONSE"
        subagent_content = "SUBAGENT_RESPONSE"
        test_tags = ["test-tag", "session-123"]

        parent_chat_model = GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content="",
                        tool_calls=[
                            {
                                "name": "task",
                                "args": {"description": "Do task", "subagent_type": "worker"},
                                "id": "call_worker",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    AIMessage(content=parent_content),
                ]
            ),
            stream_delimiter="_",
        )
        subagent_chat_model = GenericFakeChatModel(
            messages=iter([AIMessage(content=subagent_content)]),
            stream_delimiter="_",
        )

        compiled_subagent = create_agent(model=subagent_chat_model, name="worker")
        parent_agent = create_deep_agent(
            model=parent_chat_model,
            checkpointer=InMemorySaver(),
            name="supervisor",
            subagents=[
                CompiledSubAgent(
                    name="worker", description="Does work.", runnable=compiled_subagent
                )
            ],
        )

        saw_parent_message_chunk = False
        saw_subagent_message_chunk = False
        saw_subagent_update = False
        saw_parent_tools_update = False
        saw_parent_model_update = False

        seen_agent_names: set[str | None] = set()

        for ns, stream_mode, data in parent_agent.stream(
            {"messages": [HumanMessage(content="Do something")]},
            stream_mode=["messages", "updates"],
            subgraphs=True,
            config={"configurable": {"thread_id": "test_thread"}, "tags": test_tags},
        ):
            if stream_mode == "messages":
                message_chunk, metadata = data
                agent_name = metadata.get("lc_agent_name")
                seen_agent_names.add(agent_name)
                tags = metadata.get("tags", [])

                if (
                    parent_content.split("_", maxsplit=1)[0] in message_chunk.content
                    and agent_name == "supervisor"
                ):
                    saw_parent_message_chunk = True

                if (
                    subagent_content.split("_", maxsplit=1)[0] in message_chunk.content
                    and agent_name == "worker"
                ):
                    assert all(t in tags for t in test_tags), (
                        f"Subagent chunk missing tags. Expected {test_tags}, got {tags}"
                    )
                    saw_subagent_message_chunk = True

            elif stream_mode == "updates":
                update = data
                if "model" in update and ns and ns[-1].startswith("tools:"):
                    subagent_message = update["model"]["messages"][-1]
                    assert subagent_message.content == subagent_content.replace("_", "")
                    saw_subagent_update = True
                elif "tools" in update and ns == ():
                    tool_message = update["tools"]["messages"][-1]
                    assert tool_message.content == subagent_content.replace("_", "")
                    saw_parent_tools_update = True
                elif "model" in update and ns == ():
                    parent_message = update["model"]["messages"][-1]
                    if parent_message.content == parent_content.replace("_", ""):
                        saw_parent_model_update = True

        assert saw_parent_message_chunk, "Should have seen parent message chunks in the stream"
        assert saw_subagent_message_chunk, "Should have seen subagent message chunks in the stream"
        assert saw_subagent_update, "Should have seen a subagent model update in the stream"
        assert saw_parent_tools_update, (
            "Should have seen the parent tools update with the subagent result"
        )
        assert saw_parent_model_update, (
            "Should have seen the parent final model update in the stream"
        )
        assert seen_agent_names == {"supervisor", "worker"}

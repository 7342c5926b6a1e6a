"""Whitespace-only text never reaches the API, which rejects it with a 400."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deepactors import create_deep_agent
from deepactors.messages import (
    AssistantMessage,
    SystemMessage,
    TextBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from deepactors.models import ModelRequest
from deepactors.models._anthropic_convert import EMPTY_USER_TEXT
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.conftest import MODEL_ID
from tests.anthropic.fake_api import FakeAnthropicAPI, Reply, message, text, tool_use

pytestmark = pytest.mark.anyio


def body_of(*messages: Any, **kwargs: Any) -> dict[str, Any]:
    return AnthropicModel(MODEL_ID, api_key="k").build_body(
        ModelRequest(messages=list(messages), **kwargs)
    )


def test_whitespace_text_before_a_tool_call_is_not_sent_back() -> None:
    body = body_of(
        UserMessage(content="hi"),
        AssistantMessage(
            content=[TextBlock(text="\n\n")], tool_calls=[ToolCall(id="t1", name="ls")]
        ),
        ToolMessage(
            tool_call_id="t1", name="ls", content=[TextBlock(text=" \n"), TextBlock(text="a.txt")]
        ),
        ToolMessage(tool_call_id="t1", name="ls", content="  \n"),
        UserMessage(content="  "),
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        # The tool_use block keeps the turn alive.
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        },
        {
            # The blank user text merges into the tool results' turn: nothing to add.
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "a.txt"}],
                },
                {"type": "tool_result", "tool_use_id": "t1"},
            ],
        },
    ]


def test_blank_user_turn_standing_alone_becomes_a_placeholder() -> None:
    body = body_of(
        UserMessage(content=" "),
        AssistantMessage(content="Hello."),
        AssistantMessage(content="\n"),
        UserMessage(content=[TextBlock(text="\t")]),
        SystemMessage(content="  "),
        system_prompt=" \n",
    )
    placeholder = {"role": "user", "content": [{"type": "text", "text": EMPTY_USER_TEXT}]}
    # The conversation still starts and ends with a user turn (no accidental prefill),
    # and the blank assistant message is gone.
    assert body["messages"] == [
        placeholder,
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
        placeholder,
    ]
    assert "system" not in body


async def test_agent_survives_claude_writing_blank_text_before_a_tool_call(
    api: FakeAnthropicAPI,
) -> None:
    def list_things() -> str:
        """List the files."""
        return "a.txt"

    def brain(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["content"][0]["type"] != "tool_result":
            return message(text("\n\n"), tool_use("list_things", {}))
        return message(text("There is a.txt."))

    api.default = brain
    async with AnthropicModel(MODEL_ID, api_key="k", base_url=api.base_url) as model:
        agent = create_deep_agent(model=model, tools=[list_things])
        with anyio.fail_after(10):
            first = await agent.ainvoke({"messages": "what is there?"})
            # The next turn of the same thread resends the blank text: still accepted.
            second = await agent.ainvoke(
                {"messages": [*first["messages"], UserMessage(content="and?")]}
            )
    assert first["messages"][-1].text == "There is a.txt."
    assert second["messages"][-1].text == "There is a.txt."
    assert all(r.body["messages"][0]["role"] == "user" for r in api.requests)

"""A real ``ChatOpenAI`` (langchain-openai over the openai SDK) against a local OpenAI API.

The server is the OpenAI adapter's test server (``tests/openai/fake_api.py``): it
answers from a script and checks every request body against the SDK's own
request types.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool

from deepactors.langchain import LangChainChatModel, create_deep_agent
from tests.openai.fake_api import FakeOpenAI, answer, call

pytestmark = pytest.mark.anyio

langchain_openai = pytest.importorskip("langchain_openai")


@tool
def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f"The weather in {city} is sunny."


@pytest.fixture
def api() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
    assert server.invalid == []


def script(api: FakeOpenAI) -> None:
    api.reply(
        answer(calls=[call("task", {"description": "Tokyo weather", "subagent_type": "weather"})]),
        answer(calls=[call("get_weather", {"city": "Tokyo"})]),
        answer("Sunny in Tokyo."),
        answer("It is sunny in Tokyo."),
    )


def agent_on(api: FakeOpenAI) -> object:
    chat = langchain_openai.ChatOpenAI(
        model="gpt-5.5", base_url=api.base_url, api_key="sk-test", max_retries=0
    )
    return create_deep_agent(
        model=chat,
        subagents=[
            {
                "name": "weather",
                "description": "Knows the weather.",
                "system_prompt": "Use get_weather.",
                "tools": [get_weather],
            }
        ],
    )


async def test_chatopenai_drives_a_deep_agent_with_a_subagent(api: FakeOpenAI) -> None:
    script(api)
    agent = agent_on(api)
    assert isinstance(agent.model, LangChainChatModel)
    assert agent.model.context_window is None or agent.model.context_window > 0
    result = await agent.ainvoke("Weather in Tokyo?")
    assert isinstance(result["messages"][-1], AIMessage)
    assert result["messages"][-1].content == "It is sunny in Tokyo."
    assert result["messages"][-2].content == "Sunny in Tokyo."
    tools = [sorted(t["function"]["name"] for t in r.body["tools"]) for r in api.requests]
    assert "task" in tools[0]
    assert "get_weather" in tools[1]
    assert "task" not in tools[1]
    assert result["messages"][1].usage_metadata["input_tokens"] == 100


async def test_chatopenai_streams_tokens(api: FakeOpenAI) -> None:
    script(api)
    pieces = []
    async for chunk, _meta in agent_on(api).astream("Weather?", stream_mode="messages"):
        if isinstance(chunk, AIMessageChunk) and chunk.content:
            pieces.append(chunk.content)
    assert "".join(pieces).endswith("It is sunny in Tokyo.")
    assert len(pieces) > 2
    assert all(r.body.get("stream") for r in api.requests)

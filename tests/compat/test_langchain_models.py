"""LangChain chat models as ``model=``, and LangChain message objects out (issue 25 item 2)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from deepactors import create_deep_agent
from deepactors.errors import InputError, UnsupportedLoop
from deepactors.langchain import LangChainChatModel, from_langchain, to_langchain
from deepactors.langchain import create_deep_agent as create_lc_agent
from deepactors.messages import AssistantMessage, ToolCall, UserMessage
from tests.compat.lc_fakes import AsyncOnlyChatModel, GenericFakeChatModel

pytestmark = pytest.mark.anyio


@tool
def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f"The weather in {city} is sunny."


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


def weather_models() -> tuple[GenericFakeChatModel, GenericFakeChatModel]:
    parent = GenericFakeChatModel(
        messages=iter(
            [
                call("task", {"description": "Tokyo weather", "subagent_type": "weather"}, "t1"),
                AIMessage(
                    content="Sunny in Tokyo.",
                    usage_metadata={"input_tokens": 30, "output_tokens": 4, "total_tokens": 34},
                ),
            ]
        )
    )
    child = GenericFakeChatModel(
        messages=iter(
            [
                call("get_weather", {"city": "Tokyo"}, "w1"),
                call("get_weather", {"city": "Kyoto"}, "w2"),
                AIMessage(content="Tokyo and Kyoto: sunny"),
            ]
        )
    )
    return parent, child


def weather_agent(parent: Any, child: Any, factory: Any = create_deep_agent) -> Any:
    return factory(
        model=parent,
        subagents=[
            {
                "name": "weather",
                "description": "Knows the weather.",
                "system_prompt": "Use get_weather.",
                "model": child,
                "tools": [get_weather],
            }
        ],
    )


async def test_a_deep_agent_with_subagents_runs_on_langchain_chat_models() -> None:
    parent, child = weather_models()
    result = await weather_agent(parent, child).ainvoke(
        {"messages": [HumanMessage(content="Weather in Tokyo?")]}
    )
    messages = result["messages"]
    assert messages[-1].text == "Sunny in Tokyo."
    assert messages[-2].role == "tool"
    assert messages[-2].text == "Tokyo and Kyoto: sunny"
    assert messages[-1].usage.input_tokens == 30
    # The child saw its tool results as LangChain ToolMessages answering its calls.
    last_request = child.seen[-1]
    assert [type(m).__name__ for m in last_request[-2:]] == ["AIMessage", "ToolMessage"]
    assert isinstance(last_request[-1], ToolMessage)
    assert last_request[-1].tool_call_id == "w2"


async def test_tools_are_bound_once_per_tool_set() -> None:
    parent, child = weather_models()
    await weather_agent(parent, child).ainvoke("Weather in Tokyo?")
    # Two parent turns and three child turns, one tool set each: one bind each.
    assert parent.bind_calls == 1
    assert child.bind_calls == 1
    assert "task" in parent.bound_tools[0]
    assert "get_weather" in child.bound_tools[0]
    assert "task" not in child.bound_tools[0]


async def test_answers_stream_as_deltas_and_chunks() -> None:
    parent = GenericFakeChatModel(messages=iter([AIMessage(content="one two three")]))
    agent = create_lc_agent(model=parent)
    pieces = []
    async for chunk, meta in agent.astream("count", stream_mode="messages"):
        assert isinstance(chunk, AIMessageChunk)
        pieces.append(chunk.content)
        assert meta["langgraph_node"] == "model"
    assert "".join(pieces) == "one two three"
    assert len([p for p in pieces if p]) > 1


async def test_results_and_streams_hold_langchain_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parent, child = weather_models()
    agent = weather_agent(parent, child, factory=create_lc_agent)
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "Weather?"}]})
    kinds = [type(m) for m in result["messages"]]
    assert kinds == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    calls = result["messages"][1].tool_calls
    assert calls[0]["name"] == "task"
    assert calls[0]["args"]["subagent_type"] == "weather"
    result["messages"][-1].pretty_print()
    assert "Sunny in Tokyo." in capsys.readouterr().out

    parent, child = weather_models()
    agent = weather_agent(parent, child, factory=create_lc_agent)
    seen = set()
    async for _ns, mode, data in agent.astream(
        "Weather?", stream_mode=["updates", "messages"], subgraphs=True
    ):
        if mode == "updates":
            for update in data.values():
                for message in (update or {}).get("messages", []):
                    seen.add(type(message).__name__)
        else:
            seen.add(type(data[0]).__name__)
    assert {"AIMessage", "ToolMessage", "AIMessageChunk"} <= seen


async def test_structured_output_through_the_tool_strategy() -> None:
    class Forecast(BaseModel):
        city: str
        sky: str

    model = GenericFakeChatModel(
        messages=iter([call("Forecast", {"city": "Tokyo", "sky": "clear"}, "f1")])
    )
    result = await create_deep_agent(model=model, response_format=Forecast).ainvoke("Forecast?")
    assert result["structured_response"] == Forecast(city="Tokyo", sky="clear")


async def test_an_async_only_model_runs_on_asyncio_and_is_refused_clearly_on_trio(
    anyio_backend: Any,
) -> None:
    model = AsyncOnlyChatModel(messages=iter([AIMessage(content="hello")]))
    agent = create_deep_agent(model=model)
    if anyio_backend == "trio":
        with pytest.raises(UnsupportedLoop, match="only on asyncio"):
            await agent.ainvoke("hi")
    else:
        result = await agent.ainvoke("hi")
        assert result["messages"][-1].text == "hello"


def test_messages_convert_both_ways() -> None:
    ours = AssistantMessage(
        content="hi", tool_calls=[ToolCall(id="c1", name="f", args={"x": 1})], model="m"
    )
    theirs = to_langchain(ours)
    assert isinstance(theirs, AIMessage)
    assert theirs.tool_calls == [{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}]
    back = from_langchain(theirs)
    assert isinstance(back, AssistantMessage)
    assert (back.text, back.tool_calls[0].args, back.model) == ("hi", {"x": 1}, "m")
    assert isinstance(from_langchain(HumanMessage(content="yo")), UserMessage)


def test_the_same_chat_model_object_gets_one_adapter() -> None:
    parent, _ = weather_models()
    agent = create_deep_agent(
        model=parent,
        subagents=[{"name": "a", "description": "A.", "system_prompt": "A.", "model": parent}],
    )
    assert isinstance(agent.model, LangChainChatModel)
    assert agent.model.chat_model is parent
    sub = agent.spec.middleware
    models = {id(s.agent.model) for mw in sub for s in getattr(mw, "specs", {}).values()}
    assert models == {id(agent.model)}


def test_provider_chat_models_and_init_chat_model_strings_are_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_anthropic import ChatAnthropic

    from deepactors.models import resolve_model

    claude = ChatAnthropic(model="claude-sonnet-4-6", api_key="sk-test")
    agent = create_deep_agent(model=claude)
    assert isinstance(agent.model, LangChainChatModel)
    assert agent.model.model_name == "claude-sonnet-4-6"

    # A provider deepactors does not know itself goes to LangChain's init_chat_model.
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    gemini = resolve_model("google_genai:gemini-3-pro")
    assert isinstance(gemini, LangChainChatModel)
    assert type(gemini.chat_model).__name__ == "ChatGoogleGenerativeAI"


async def test_with_config_batch_and_abatch() -> None:
    model = GenericFakeChatModel(messages=iter(["one", "two", "three", "four"]))
    agent = create_lc_agent(model=model).with_config({"tags": ["base"]})
    results = await agent.abatch(["a", "b"])
    assert sorted(r["messages"][-1].content for r in results) == ["one", "two"]
    assert [r["messages"][0].content for r in results] == ["a", "b"]
    seen = []
    async for _chunk, meta in agent.astream("c", {"tags": ["call"]}, stream_mode="messages"):
        seen.append(meta.get("tags"))
    assert ["base", "call"] in seen
    assert create_lc_agent(model=model).batch(["d"])[0]["messages"][-1].content == "four"


def test_with_config_names_a_config_part_it_cannot_merge() -> None:
    agent = create_lc_agent(model=GenericFakeChatModel(messages=iter(["one"])))
    configured = agent.with_config({"configurable": {"user": "u"}, "tags": ["base"]})
    with pytest.raises(InputError, match=r"config\['configurable'\] must be a mapping"):
        configured.with_config({"configurable": "u2"})
    with pytest.raises(InputError, match=r"config\['tags'\] must be a list"):
        configured.with_config({"tags": "call"})


async def test_astream_events_v2_gives_langchains_event_dicts() -> None:
    parent, child = weather_models()
    agent = weather_agent(parent, child, factory=create_lc_agent)
    kinds: list[str] = []
    streamed = ""
    tool_ends = []
    async for event in agent.astream_events("Weather?", {"tags": ["t1"]}, version="v2"):
        kinds.append(event["event"])
        assert event["tags"] == ["t1"]
        if event["event"] == "on_chat_model_stream":
            assert isinstance(event["data"]["chunk"], AIMessageChunk)
            streamed += event["data"]["chunk"].content
        if event["event"] == "on_tool_end":
            assert isinstance(event["data"]["output"], ToolMessage)
            tool_ends.append((event["name"], event["metadata"]["lc_agent_name"]))
    assert kinds[0] == "on_chain_start"
    assert kinds[-1] == "on_chain_end"
    assert {"on_chat_model_start", "on_chat_model_end", "on_tool_start"} <= set(kinds)
    assert "Sunny in Tokyo." in streamed
    assert ("get_weather", "weather") in tool_ends
    assert ("task", "main") in tool_ends

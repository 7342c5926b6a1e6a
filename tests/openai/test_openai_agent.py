"""End to end: deep agents on OpenAIModel against the local server, on both APIs and loops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from deepactors import create_deep_agent
from deepactors.events import ContextSummarized, Event, ModelDelta
from deepactors.messages import AssistantMessage, ToolMessage
from deepactors.middleware._retry import ModelRetryMiddleware
from deepactors.models.openai import OpenAIModel
from tests.openai.bodies import first_user_text, tool_names, tool_outputs, turns
from tests.openai.conftest import MODEL_ID
from tests.openai.fake_api import Answer, FakeOpenAI, answer, call, error

pytestmark = pytest.mark.anyio

JSON = dict[str, Any]
CHILDREN = 20


@pytest.fixture
async def model(api: FakeOpenAI, api_kind: Any) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        MODEL_ID, api=api_kind, api_key="k", base_url=api.base_url, max_concurrent_requests=8
    ) as m:
        yield m


async def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return {"Paris": "sunny, 21C", "Oslo": "snow, -3C"}[city]


def research_brain(body: JSON) -> Answer:
    """Main: parallel weather calls and CHILDREN tasks in one turn, then a summary.
    Each child: one weather call, then its findings."""
    if "task" not in tool_names(body):  # a subagent
        brief = first_user_text(body)
        done = tool_outputs(body)
        if not done:
            return answer("", calls=[call("get_weather", {"city": "Oslo"})])
        return answer(f"{brief}: {done[0]}", usage={"input": 50, "output": 5})
    results = tool_outputs(body)
    if not results:
        tasks = [
            call("task", {"description": f"topic {i}", "subagent_type": "general-purpose"})
            for i in range(CHILDREN)
        ]
        weather = [call("get_weather", {"city": c}) for c in ("Paris", "Oslo")]
        return answer("Fanning out.", calls=weather + tasks)
    return answer(f"{len(results)} results read")


async def test_fan_out_with_parallel_tool_calls_through_a_rate_limit(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    api.default = research_brain
    api.reply(error(429, "rate_limit_exceeded", "slow down", retry_after=0.01))
    agent = create_deep_agent(
        model=model,
        tools=[get_weather],
        system_prompt="You research.",
        middleware=[ModelRetryMiddleware(initial_delay=0.001)],
    )
    with anyio.fail_after(60):
        result = await agent.ainvoke("Research twenty topics and the weather.")

    assert result["messages"][-1].text == f"{CHILDREN + 2} results read"
    outputs = sorted(m.text for m in result["messages"] if isinstance(m, ToolMessage))
    assert outputs == sorted(
        ["sunny, 21C", "snow, -3C", *(f"topic {i}: snow, -3C" for i in range(CHILDREN))]
    )
    # The 429, the main agent's two turns, each child's two turns.
    assert len(api.requests) == 1 + 2 + 2 * CHILDREN
    assert api.requests[0].body == api.requests[1].body  # the retry resent it as is
    assert api.max_in_flight <= 8
    usage = result["usage"]
    assert usage.requests == 2 + 2 * CHILDREN
    assert usage.cost_usd is not None
    assert usage.cost_usd > 0


def fetching(body: JSON) -> Answer:
    """Fetch pages until done; the server refuses a conversation longer than 9 turns."""
    if "tools" not in body:
        return answer("SUMMARY: pages fetched so far.")
    summarized = "<summary>" in first_user_text(body)
    if len(turns(body)) > 9 and not summarized:
        return error(400, "context_length_exceeded", "maximum context length is 8192 tokens")
    done = len(
        [
            t
            for t in turns(body)
            if t.get("role") == "tool" or t.get("type") == "function_call_output"
        ]
    )
    if done < 6 and not (summarized and done >= 2):
        return answer("", calls=[call("fetch", {"page": done + 1})])
    return answer("all fetched")


async def fetch(page: int) -> str:
    """Fetch a page.

    Args:
        page: Its number.
    """
    return f"page {page}: " + "lorem " * 50


async def test_a_context_window_error_is_recovered_by_summarization(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    api.default = fetching
    agent = create_deep_agent(model, tools=[fetch])
    seen: list[Event] = []
    with anyio.fail_after(30):
        async with agent.astream("fetch six pages") as events:
            async for event in events:
                seen.append(event)
    assert events.result["messages"][-1].text == "all fetched"
    (summarized,) = [e for e in seen if isinstance(e, ContextSummarized)]
    assert summarized.reason == "overflow"
    assert any(isinstance(e, ModelDelta) and e.kind == "text" for e in seen)


class Weather(BaseModel):
    city: str
    celsius: float


async def test_structured_output_uses_the_native_json_schema(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    api.reply(answer('{"city": "Oslo", "celsius": 3.5}'))
    agent = create_deep_agent(model, response_format=Weather)
    with anyio.fail_after(10):
        result = await agent.ainvoke("weather in Oslo as JSON")
    assert result["structured_response"] == Weather(city="Oslo", celsius=3.5)
    body = api.requests[0].body
    fmt = body["response_format"]["json_schema"] if model.api == "chat" else body["text"]["format"]
    assert fmt["schema"]["properties"].keys() == {"city", "celsius"}


async def test_a_compatible_server_without_usage_or_ids_completes_the_run(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    content = 'Line one.\nLine "two" — ünïcode, {braces}.\n'

    def sloppy(body: JSON) -> Answer:
        if tool_outputs(body):
            return answer("written", compat=True)
        args = {"file_path": "/notes.md", "content": content}
        return answer("", calls=[call("write_file", args)], compat=True)

    api.default = sloppy
    agent = create_deep_agent(model)
    deltas: list[str] = []
    with anyio.fail_after(10):
        async with agent.astream("write notes") as events:
            async for event in events:
                if isinstance(event, ModelDelta) and event.kind == "tool_input":
                    deltas.append(event.text)
    result = events.result
    assert result["messages"][-1].text == "written"
    assert result["files"]["/notes.md"].content == content
    assert result["usage"] is None
    calls = [c for m in result["messages"] if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert calls[0].id  # made up, and answered by that id
    assert (
        next(m for m in result["messages"] if isinstance(m, ToolMessage)).tool_call_id
        == calls[0].id
    )
    if model.api == "chat":
        assert all(len(d) == 1 for d in deltas)  # one character per chunk


@pytest.mark.parametrize("api_kind", ["chat", "responses"])
def test_the_same_agent_and_model_run_on_asyncio_then_trio(api: FakeOpenAI, api_kind: Any) -> None:
    api.default = research_brain
    model = OpenAIModel(MODEL_ID, api=api_kind, api_key="k", base_url=api.base_url)
    agent = create_deep_agent(model=model, tools=[get_weather])
    for loop in ("asyncio", "trio", "asyncio"):
        result = agent.invoke("Research twenty topics and the weather.", backend=loop)
        assert result["messages"][-1].text == f"{CHILDREN + 2} results read"
    assert len(api.requests) == 3 * (2 + 2 * CHILDREN)

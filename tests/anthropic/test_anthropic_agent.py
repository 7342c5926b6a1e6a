"""End to end: deep agents on AnthropicModel against the local Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from deepactors import create_deep_agent
from deepactors.events import ModelCallFinished, ModelDelta, ToolCallFinished
from deepactors.messages import AssistantMessage, ToolMessage, Usage
from deepactors.middleware._caching import AnthropicPromptCachingMiddleware
from deepactors.middleware._retry import ModelRetryMiddleware
from deepactors.models.anthropic import AnthropicModel
from deepactors.models.profiles import profile_for
from tests.anthropic.conftest import MODEL_ID
from tests.anthropic.fake_api import FakeAnthropicAPI, Reply, error, message, text, tool_use

pytestmark = pytest.mark.anyio


def assert_priced(usage: Usage | None, expected: Usage) -> None:
    """``usage`` has the expected counts, and their cost at the model's prices."""
    assert usage is not None
    assert usage.model_copy(update={"cost_usd": None}) == expected
    profile = profile_for(MODEL_ID)
    assert profile is not None
    assert usage.cost_usd == pytest.approx(profile.cost(expected))


MAIN_USAGE = {"input_tokens": 1000, "output_tokens": 50, "cache_read_input_tokens": 500}
CHILD_USAGE = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 7}


async def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return {"Paris": "sunny, 21C", "Oslo": "snow, -3C"}[city]


def last_turn(body: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = body["messages"][-1]["content"]
    return content


def has_tool_results(body: dict[str, Any]) -> bool:
    return any(block["type"] == "tool_result" for block in last_turn(body))


def weather_brain(body: dict[str, Any]) -> Reply:
    """Turn 1: two parallel weather calls. Turn 2: answer from their results."""
    if not has_tool_results(body):
        return message(
            text("Checking both cities."),
            tool_use("get_weather", {"city": "Paris"}),
            tool_use("get_weather", {"city": "Oslo"}),
            usage=MAIN_USAGE,
        )
    results = {b["tool_use_id"]: b.get("content", "") for b in last_turn(body)}
    return message(text("Paris: " + " / ".join(sorted(results.values()))), usage=MAIN_USAGE)


@pytest.fixture
async def claude(api: FakeAnthropicAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        MODEL_ID, api_key="k", base_url=api.base_url, max_concurrent_requests=8
    ) as model:
        yield model


def weather_agent(model: AnthropicModel) -> Any:
    return create_deep_agent(
        model=model,
        tools=[get_weather],
        system_prompt="You report the weather.",
        middleware=[
            AnthropicPromptCachingMiddleware(),
            ModelRetryMiddleware(initial_delay=0.001),
        ],
    )


async def test_agent_completes_a_multi_turn_tool_run_through_retries(
    api: FakeAnthropicAPI, claude: AnthropicModel
) -> None:
    api.default = weather_brain
    api.reply(error(429, "rate_limit_error", "slow down", retry_after=0.01))
    with anyio.fail_after(10):
        result = await weather_agent(claude).ainvoke(
            {"messages": [{"role": "user", "content": "Weather in Paris and Oslo?"}]}
        )

    messages = result["messages"]
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.text == "Paris: snow, -3C / sunny, 21C"
    assert sorted(m.text for m in messages if isinstance(m, ToolMessage)) == [
        "snow, -3C",
        "sunny, 21C",
    ]
    # 429, the tool turn, the answer.
    assert len(api.requests) == 3
    first, second = api.requests[1].body, api.requests[2].body
    assert first["messages"] == api.requests[0].body["messages"]  # the retry resent it as is
    assert {t["name"] for t in first["tools"]} >= {"get_weather", "write_todos", "task"}

    # The answer's request carries the tool_use turn and both results, by id.
    calls = [b for b in second["messages"][-2]["content"] if b["type"] == "tool_use"]
    results = [b for b in last_turn(second) if b["type"] == "tool_result"]
    assert [c["input"]["city"] for c in calls] == ["Paris", "Oslo"]
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls]

    # Prompt caching: tools, system prompt and the newest user turns, within the limit.
    for body in (first, second):
        marked = [
            *(t for t in body["tools"] if "cache_control" in t),
            *(s for s in body["system"] if "cache_control" in s),
            *(b for turn in body["messages"] for b in turn["content"] if "cache_control" in b),
        ]
        assert 3 <= len(marked) <= 4
        assert "cache_control" in body["tools"][-1]
        assert "cache_control" in body["system"][-1]
    assert "cache_control" in last_turn(second)[-1]

    assert_priced(
        result["usage"],
        Usage(input_tokens=2000, output_tokens=100, cache_read_tokens=1000, requests=2),
    )


async def test_streamed_run_delivers_token_deltas(
    api: FakeAnthropicAPI, claude: AnthropicModel
) -> None:
    api.default = weather_brain
    events: list[Any] = []
    with anyio.fail_after(10):
        async with weather_agent(claude).astream("Weather in Paris and Oslo?") as stream:
            async for event in stream:
                events.append(event)
    assert all(r.body["stream"] is True for r in api.requests)
    finished = [e.message for e in events if isinstance(e, ModelCallFinished)]
    assert len(finished) == 2
    answer_text = "".join(
        e.text
        for e in events
        if isinstance(e, ModelDelta) and e.kind == "text" and e.run_id == events[-1].run_id
    )
    assert answer_text == "Checking both cities." + finished[1].text
    tool_json = "".join(
        e.text for e in events if isinstance(e, ModelDelta) and e.kind == "tool_input"
    )
    assert tool_json == '{"city": "Paris"}{"city": "Oslo"}'
    assert len([e for e in events if isinstance(e, ToolCallFinished)]) == 2


SUBAGENTS = 200


def research_brain(body: dict[str, Any]) -> Reply:
    """The main agent fans out SUBAGENTS tasks at once; each child answers once."""
    tools = {t["name"] for t in body.get("tools", [])}
    if "task" not in tools:  # a subagent: answer its brief
        brief = body["messages"][0]["content"][0]["text"]
        return message(text(f"findings on {brief}"), usage=CHILD_USAGE, delay=0.005)
    if not has_tool_results(body):
        return message(
            *(
                tool_use(
                    "task",
                    {"description": f"topic {i}", "subagent_type": "general-purpose"},
                )
                for i in range(SUBAGENTS)
            ),
            usage=MAIN_USAGE,
        )
    return message(text(f"{len(last_turn(body))} reports read"), usage=MAIN_USAGE)


async def test_subagents_share_the_request_limit_and_their_usage_adds_up(
    api: FakeAnthropicAPI, claude: AnthropicModel
) -> None:
    api.default = research_brain
    agent = create_deep_agent(model=claude, system_prompt="You research.")
    with anyio.fail_after(60):
        result = await agent.ainvoke("Research 200 topics.")

    assert result["messages"][-1].text == f"{SUBAGENTS} reports read"
    reports = sorted(m.text for m in result["messages"] if isinstance(m, ToolMessage))
    assert reports == sorted(f"findings on topic {i}" for i in range(SUBAGENTS))
    assert len(api.requests) == SUBAGENTS + 2
    # One model instance, one limit, however many actors call it.
    assert api.max_in_flight <= 8
    # Calls overlapped under it (how many at the peak is the machine's business:
    # all 8 on a quiet one, fewer when the fake API answers before more start).
    assert 1 < claude.limiter.statistics().peak_in_flight <= 8
    assert_priced(
        result["usage"],
        Usage(
            input_tokens=2 * 1000 + SUBAGENTS * 100,
            output_tokens=2 * 50 + SUBAGENTS * 10,
            cache_read_tokens=2 * 500,
            cache_write_tokens=SUBAGENTS * 7,
            requests=SUBAGENTS + 2,
        ),
    )

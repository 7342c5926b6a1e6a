"""Summarization and memory with AnthropicModel over the local Messages API server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from deepactors import create_deep_agent
from deepactors.events import ContextSummarized, Event
from deepactors.middleware._summary_call import SUMMARY_SYSTEM
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, Reply, error, message, text, tool_use

from .conftest import fetch

pytestmark = pytest.mark.anyio

JSON = dict[str, Any]


@pytest.fixture
def api() -> Iterator[FakeAnthropicAPI]:
    with FakeAnthropicAPI() as server:
        yield server


@pytest.fixture
async def haiku(api: FakeAnthropicAPI) -> AsyncIterator[AnthropicModel]:
    # claude-haiku-4-5 has a 200k window: summarization fires at 170k tokens.
    async with AnthropicModel("claude-haiku-4-5", api_key="k", base_url=api.base_url) as model:
        yield model


def results_in(body: JSON) -> int:
    return sum(
        1
        for turn in body["messages"]
        if turn["role"] == "user"
        for block in turn["content"]
        if block["type"] == "tool_result"
    )


def first_user_text(body: JSON) -> str:
    blocks = body["messages"][0]["content"]
    return " ".join(b.get("text", "") for b in blocks if b["type"] == "text")


def fetching(body: JSON, *, pages: int, tokens_per_turn: int) -> Reply:
    """An agent that fetches ``pages`` pages; usage grows with each turn in the request."""
    if "tools" not in body:
        return message(text("SUMMARY: pages fetched so far."), usage={"input_tokens": 900})
    turns = len(body["messages"])
    usage = {"input_tokens": 2_000 + tokens_per_turn * turns, "output_tokens": 20}
    done = results_in(body)
    summarized = "<summary>" in first_user_text(body)
    if done < pages and not (summarized and done >= 2):
        return message(tool_use("fetch", {"page": done + 1}), usage=usage)
    return message(text("all fetched"), usage=usage)


async def stream(agent: Any, payload: Any) -> tuple[dict[str, Any], list[Event]]:
    seen: list[Event] = []
    with anyio.fail_after(30):
        async with agent.astream(payload) as events:
            async for event in events:
                seen.append(event)
    return events.result, seen


async def test_summary_from_provider_usage_over_the_messages_api(
    api: FakeAnthropicAPI, haiku: AnthropicModel
) -> None:
    api.default = lambda body: fetching(body, pages=20, tokens_per_turn=30_000)
    agent = create_deep_agent(haiku, tools=[fetch], memory=["/AGENTS.md"])
    result, events = await stream(
        agent, {"messages": "fetch the pages", "files": {"/AGENTS.md": "Be thorough."}}
    )
    assert result["messages"][-1].text == "all fetched"
    (summarized,) = [e for e in events if isinstance(e, ContextSummarized)]
    # The count came from the API's usage: the text itself is a few thousand tokens.
    assert summarized.tokens_before > 170_000
    assert summarized.tokens_after < summarized.tokens_before

    bodies = [r.body for r in api.requests]
    summary_calls = [i for i, b in enumerate(bodies) if "tools" not in b]
    assert len(summary_calls) == 1
    ask = bodies[summary_calls[0]]
    assert ask["system"][0]["text"] == SUMMARY_SYSTEM
    assert len(ask["messages"]) == 1  # the excerpt as text, no tool blocks
    after = bodies[summary_calls[0] + 1]
    before = bodies[summary_calls[0] - 1]
    assert "<summary>\nSUMMARY: pages fetched so far.\n</summary>" in first_user_text(after)
    assert len(after["messages"]) < len(before["messages"])


async def test_memory_sits_after_the_system_cache_breakpoint(
    api: FakeAnthropicAPI, haiku: AnthropicModel
) -> None:
    api.default = lambda body: message(text("ok"))
    agent = create_deep_agent(haiku, memory=["/AGENTS.md"])
    await agent.ainvoke({"messages": "hi", "files": {"/AGENTS.md": "v1 notes"}})
    await agent.ainvoke({"messages": "hi", "files": {"/AGENTS.md": "v2 notes, edited"}})
    first, second = (r.body["system"] for r in api.requests)
    # The prompt block carries the breakpoint and is the same in both calls...
    assert first[0]["cache_control"] == {"type": "ephemeral"}
    assert first[0] == second[0]
    # ...and the memory follows it, unmarked, and changes.
    assert "v1 notes" in first[-1]["text"]
    assert "v2 notes, edited" in second[-1]["text"]
    assert "cache_control" not in second[-1]


async def test_prompt_too_long_from_the_api_summarizes_and_retries(
    api: FakeAnthropicAPI, haiku: AnthropicModel
) -> None:
    def answer(body: JSON) -> Reply:
        if "tools" not in body:
            return message(text("SUMMARY: earlier pages."))
        if len(body["messages"]) > 7 and "<summary>" not in first_user_text(body):
            return error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000")
        return fetching(body, pages=6, tokens_per_turn=10)

    api.default = answer
    agent = create_deep_agent(haiku, tools=[fetch])
    result, events = await stream(agent, "fetch six pages")
    assert result["messages"][-1].text == "all fetched"
    (summarized,) = [e for e in events if isinstance(e, ContextSummarized)]
    assert summarized.reason == "overflow"
    sizes = [len(r.body["messages"]) for r in api.requests if "tools" in r.body]
    refused = sizes.index(max(sizes))
    assert sizes[refused + 1] < sizes[refused]

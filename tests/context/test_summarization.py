"""SummarizationMiddleware on FunctionModel: bounded requests, history offload, overflow, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.errors import ConfigurationError, ContextWindowExceeded
from deepactors.events import ContextSummarized, Event
from deepactors.messages import ToolMessage, UserMessage
from deepactors.middleware import SummarizationMiddleware
from deepactors.middleware._summarization import SUMMARY_CHANNEL
from deepactors.middleware._summary_call import SUMMARY_SYSTEM
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer, SqliteCheckpointer

from .conftest import (
    LongRun,
    assert_pairs_intact,
    fetch,
    file_text,
    history_ids,
    is_summary_call,
    request_tokens,
    summary_text,
)

pytestmark = pytest.mark.anyio

TRIGGER = 4_000
ONE_TURN = 600  # an assistant call plus a 2,000-character result, in estimated tokens


def long_agent(model: LongRun, **kwargs: Any) -> Any:
    return create_deep_agent(
        FunctionModel(model),
        tools=[fetch],
        middleware=[
            SummarizationMiddleware(trigger=("tokens", TRIGGER), keep=("tokens", 1_200)),
        ],
        max_steps=400,
        **kwargs,
    )


async def run_events(agent: Any, text: str, **kwargs: Any) -> tuple[dict[str, Any], list[Event]]:
    seen: list[Event] = []
    with anyio.fail_after(60):
        async with agent.astream(text, **kwargs) as events:
            async for event in events:
                seen.append(event)
    assert events.result is not None
    return events.result, seen


async def test_a_200_turn_run_never_sends_more_than_the_trigger_plus_one_turn() -> None:
    model = LongRun(200)
    agent = long_agent(model, checkpointer=MemoryCheckpointer())
    result, events = await run_events(agent, "fetch the whole archive", thread_id="t1")

    assert result["messages"][-1].text == "all pages fetched"
    assert len(model.requests) == 201
    assert max(model.sizes) <= TRIGGER + ONE_TURN
    # The state keeps the whole conversation: every page result is still there.
    pages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(pages) == 200
    summarized = [e for e in events if isinstance(e, ContextSummarized)]
    assert len(summarized) == len(model.summaries) > 10
    assert all(e.reason == "trigger" and e.tokens_after < e.tokens_before for e in summarized)
    assert {e.file_path for e in summarized} == {"/conversation_history/t1.md"}
    # Every summary call had no tools and its own instructions.
    assert all(r.tools == () and r.system_prompt == SUMMARY_SYSTEM for r in model.summaries)


async def test_the_history_file_holds_every_dropped_message_once_in_order() -> None:
    model = LongRun(60)
    agent = long_agent(model, checkpointer=MemoryCheckpointer())
    result, _ = await run_events(agent, "fetch", thread_id="archive-7")

    marker = result[SUMMARY_CHANNEL]
    ids = [m.id for m in result["messages"]]
    dropped = ids[: ids.index(marker["after"]) + 1]
    text = file_text(result, "/conversation_history/archive-7.md")
    assert history_ids(text) == dropped
    assert marker["dropped"] == len(dropped)
    # Whole messages, arguments and results as they were.
    assert "page 1: xxxx" in text
    assert "-> tool call `fetch`" in text
    assert text.count("## Messages ") == marker["summaries"]


async def test_a_summary_never_separates_a_tool_call_from_its_result() -> None:
    # Three parallel calls per turn make the cut land inside a turn often.
    turn = 0

    def model(request: ModelRequest) -> AssistantMessage | str:
        nonlocal turn
        if is_summary_call(request):
            return "SUMMARY: pages."
        assert_pairs_intact(request.messages)
        first = request.messages[0]
        if summary_text(first) is not None:
            assert not isinstance(request.messages[1], ToolMessage)
        turn += 1
        if turn > 40:
            return "done"
        return AssistantMessage(
            tool_calls=[ToolCall(name="fetch", args={"page": turn * 10 + i}) for i in range(3)]
        )

    agent = create_deep_agent(
        FunctionModel(model),
        tools=[fetch],
        middleware=[SummarizationMiddleware(trigger=("tokens", 6_000), keep=("messages", 5))],
    )
    result = await agent.ainvoke("go")
    assert result["messages"][-1].text == "done"
    assert result[SUMMARY_CHANNEL]["summaries"] > 3


async def test_messages_trigger_and_keep() -> None:
    model = LongRun(30)
    agent = create_deep_agent(
        FunctionModel(model),
        tools=[fetch],
        middleware=[SummarizationMiddleware(trigger=("messages", 12), keep=("messages", 4))],
    )
    await agent.ainvoke("go")
    # The view (summary included) never has more than the trigger plus one turn.
    assert max(len(r.messages) for r in model.requests) <= 12 + 2
    assert model.summaries


async def test_context_window_exceeded_summarizes_and_retries_once() -> None:
    calls: list[int] = []

    def model(request: ModelRequest) -> AssistantMessage | str:
        if is_summary_call(request):
            return "SUMMARY: earlier pages."
        calls.append(len(request.messages))
        # The real window is smaller than the middleware thought (default 170k).
        if request_tokens(request) > 5_000:
            raise ContextWindowExceeded("prompt is too long: 5001 tokens > 5000 maximum")
        done = sum(isinstance(m, ToolMessage) for m in request.messages)
        if len(calls) > 12:
            return "finished"
        return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": done})])

    agent = create_deep_agent(FunctionModel(model), tools=[fetch])
    result, events = await run_events(agent, "go")
    assert result["messages"][-1].text == "finished"
    overflow = [e for e in events if isinstance(e, ContextSummarized)]
    assert overflow
    assert all(e.reason == "overflow" for e in overflow)
    # Each refused call was followed by exactly one retry, on a smaller view.
    refused = [i for i, n in enumerate(calls) if i + 1 < len(calls) and calls[i + 1] < n]
    assert len(refused) == len(overflow)


async def test_an_overflow_with_nothing_left_to_drop_raises() -> None:
    attempts = 0

    def model(request: ModelRequest) -> str:
        nonlocal attempts
        if is_summary_call(request):
            return "SUMMARY"
        attempts += 1
        raise ContextWindowExceeded("prompt is too long")

    agent = create_deep_agent(FunctionModel(model))
    with pytest.raises(ContextWindowExceeded):
        await agent.ainvoke("one short question")
    assert attempts == 1  # one message: nothing a summary could replace, no retry


async def test_a_thread_resumed_after_a_summary_shows_the_summary_not_the_dropped(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.db"
    first = LongRun(25, answer="first batch done")
    async with SqliteCheckpointer(db) as saver:
        agent = long_agent(first, checkpointer=saver)
        result = await agent.ainvoke("fetch pages", thread_id="t")
        marker = result[SUMMARY_CHANNEL]
        assert marker["summaries"] >= 1
        ids = [m.id for m in result["messages"]]
        dropped = set(ids[: ids.index(marker["after"]) + 1])

    # A new agent object and a new checkpointer on the same file: a fresh process.
    second = LongRun(0, answer="second answer")
    async with SqliteCheckpointer(db) as saver:
        agent = long_agent(second, checkpointer=saver)
        result = await agent.ainvoke("anything new?", thread_id="t")
    assert result["messages"][-1].text == "second answer"
    (request,) = second.requests
    assert summary_text(request.messages[0]) == marker["summary"]
    assert not dropped & {m.id for m in request.messages}
    assert request.messages[-1].text == "anything new?"
    # The thread still holds everything.
    assert dropped <= {m.id for m in result["messages"]}


async def test_old_long_tool_arguments_are_cut_in_the_view_not_in_the_state() -> None:
    big = "B" * 5_000
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> AssistantMessage | str:
        seen.append(request)
        n = len(seen)
        if n == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="write_file", args={"file_path": "/big.txt", "content": big})
                ]
            )
        if n <= 25:
            return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": n})])
        return "done"

    agent = create_deep_agent(FunctionModel(model), tools=[fetch])
    result = await agent.ainvoke("write then fetch")
    writes = [
        c
        for m in seen[-1].messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.name == "write_file"
    ]
    assert len(writes[0].args["content"]) < 200
    assert "truncated" in writes[0].args["content"]
    # A recent call keeps its arguments whole.
    early = [c for m in seen[2].messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert early[0].args["content"] == big
    stored = [
        c for m in result["messages"] if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert stored[0].args["content"] == big
    assert result["files"]["/big.txt"].content == big


async def test_compact_conversation_tool_summarizes_on_request() -> None:
    turn = 0
    results: list[str] = []

    def model(request: ModelRequest) -> AssistantMessage | str:
        nonlocal turn
        if is_summary_call(request):
            return "SUMMARY: compacted on request."
        results.extend(m.text for m in request.messages[-1:] if isinstance(m, ToolMessage))
        turn += 1
        if turn in (1, 6):
            return AssistantMessage(tool_calls=[ToolCall(name="compact_conversation")])
        if turn < 9:
            return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": turn})])
        return "done"

    agent = create_deep_agent(
        FunctionModel(model),
        tools=[fetch],
        middleware=[
            SummarizationMiddleware(
                trigger=("tokens", 8_000), keep=("messages", 2), compact_tool=True
            )
        ],
    )
    result, events = await run_events(agent, "go")
    assert results[0].startswith("Not compacted")
    assert any("will be summarized" in r for r in results)
    (summarized,) = [e for e in events if isinstance(e, ContextSummarized)]
    assert summarized.reason == "tool"
    assert result[SUMMARY_CHANNEL]["compact"] is False


async def test_fraction_needs_a_model_that_declares_a_window() -> None:
    with pytest.raises(ConfigurationError, match="context window"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            middleware=[SummarizationMiddleware(trigger=("fraction", 0.5))],
        )
    agent = create_deep_agent(
        FunctionModel(lambda r: "x", context_window=100_000),
        middleware=[SummarizationMiddleware(trigger=("fraction", 0.5))],
    )
    (mw,) = [m for m in agent.spec.middleware if isinstance(m, SummarizationMiddleware)]
    assert mw.limits.trigger_tokens == 50_000
    assert mw.limits.keep_tokens == 10_000  # the default keep with a window: 10%


@pytest.mark.parametrize(
    "bad",
    [("tokens", 0), ("fraction", 1.5), ("pages", 3), ("messages", 2.5), "tokens", ("tokens",)],
)
def test_bad_sizes_are_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        SummarizationMiddleware(trigger=bad)


def test_defaults_follow_the_model_window() -> None:
    with_window = SummarizationMiddleware(FunctionModel(lambda r: "x", context_window=200_000))
    assert with_window.limits.trigger_tokens == 170_000
    assert with_window.limits.keep_tokens == 20_000
    without = SummarizationMiddleware(FunctionModel(lambda r: "x"))
    assert without.limits.trigger_tokens == 170_000
    assert without.limits.keep_messages == 6


async def test_subagents_summarize_into_files_of_their_own() -> None:
    parent_turn = 0

    def parent(request: ModelRequest) -> AssistantMessage | str:
        nonlocal parent_turn
        parent_turn += 1
        if parent_turn == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": f"fetch {i}", "subagent_type": "f"})
                    for i in range(2)
                ]
            )
        return "children done"

    def child(request: ModelRequest) -> AssistantMessage | str:
        if is_summary_call(request):
            return "SUMMARY: child pages."
        done = sum(isinstance(m, ToolMessage) for m in request.messages)
        if done < 8 and not any(summary_text(m) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": done})])
        first = next(m for m in request.messages if isinstance(m, UserMessage))
        return f"child finished ({first.text[:12]})"

    agent = create_deep_agent(
        FunctionModel(parent),
        subagents=[
            {
                "name": "f",
                "description": "fetches",
                "system_prompt": "fetch pages",
                "tools": [fetch],
                "model": FunctionModel(child),
                "middleware": [
                    SummarizationMiddleware(trigger=("tokens", 3_500), keep=("messages", 2))
                ],
            }
        ],
    )
    result = await agent.ainvoke("delegate")
    histories = sorted(p for p in result["files"] if p.startswith("/conversation_history/"))
    assert len(histories) == 2  # one per child run, no conflict copies
    assert not any("conflict" in p for p in result["files"])

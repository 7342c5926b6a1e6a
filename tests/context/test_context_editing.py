"""ContextEditingMiddleware: old tool results cleared in the view past a threshold, sticky."""

from __future__ import annotations

import itertools

import pytest

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.errors import ConfigurationError
from deepactors.messages import ToolMessage
from deepactors.middleware import ContextEditingMiddleware
from deepactors.middleware._context_editing import DEFAULT_PLACEHOLDER
from deepactors.models import FunctionModel, ModelRequest

from .conftest import fetch, request_tokens

pytestmark = pytest.mark.anyio


async def note(text: str) -> str:
    """Keep a note.

    Args:
        text: The note.
    """
    return f"noted: {text}"


def results(request: ModelRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


async def run(
    editing: ContextEditingMiddleware, turns: int = 12
) -> tuple[list[ModelRequest], dict]:
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> AssistantMessage | str:
        seen.append(request)
        n = len(seen)
        if n > turns:
            return "done"
        if n == 2:
            return AssistantMessage(tool_calls=[ToolCall(name="note", args={"text": "keep me"})])
        return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": n})])

    agent = create_deep_agent(FunctionModel(model), tools=[fetch, note], middleware=[editing])
    result = await agent.ainvoke("go")
    return seen, result


async def test_old_results_are_cleared_past_the_trigger_and_stay_cleared() -> None:
    seen, result = await run(ContextEditingMiddleware(trigger=5_000, keep=3))
    cleared_counts = [sum(m.text == DEFAULT_PLACEHOLDER for m in results(r)) for r in seen]
    # Nothing is cleared while small; once cleared, a result never comes back.
    assert cleared_counts[0] == 0
    assert max(cleared_counts) > 0
    assert cleared_counts == sorted(cleared_counts)
    last = results(seen[-1])
    assert [m.text == DEFAULT_PLACEHOLDER for m in last[-3:]] == [False, False, False]
    assert all(m.text == DEFAULT_PLACEHOLDER for m in last[:-3])
    # The state keeps every result whole.
    stored = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert all(DEFAULT_PLACEHOLDER not in m.text for m in stored)
    # Cleared only once the request grew past the trigger.
    first = next(i for i, c in enumerate(cleared_counts) if c)
    assert request_tokens(seen[first - 1]) > 5_000 - 1_000


async def test_excluded_tools_keep_their_results_and_inputs_can_be_cleared() -> None:
    seen, _ = await run(
        ContextEditingMiddleware(
            trigger=5_000, keep=1, exclude_tools=["note"], clear_tool_inputs=True
        )
    )
    last = seen[-1]
    kept = [m for m in results(last) if m.name == "note"]
    assert kept[0].text == "noted: keep me"
    cleared_ids = {m.tool_call_id for m in results(last) if m.text == DEFAULT_PLACEHOLDER}
    assert cleared_ids
    for message in last.messages:
        if isinstance(message, AssistantMessage):
            for c in message.tool_calls:
                assert (c.args == {}) == (c.id in cleared_ids)


async def test_clear_at_least_stops_early() -> None:
    seen, _ = await run(ContextEditingMiddleware(trigger=4_000, keep=0, clear_at_least=1))
    counts = [sum(m.text == DEFAULT_PLACEHOLDER for m in results(r)) for r in seen]
    # One result per call over the threshold (each frees more than one token).
    steps = [b - a for a, b in itertools.pairwise(counts)]
    assert set(steps) <= {0, 1}
    assert counts[-1] > 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ContextEditingMiddleware(trigger=0)
    with pytest.raises(ConfigurationError):
        ContextEditingMiddleware(keep=-1)

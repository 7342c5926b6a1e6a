"""The run's cap on subagents working at once: on by default, queued calls wait unstarted.

A model may ask for any number of ``task`` calls in one answer (issue 34: 100,000
ran at once). Past the run's cap they wait in the tool step as the calls they
are, start in the model's order as running ones finish, and a child's timeout
starts when the child does.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent, events
from deepactors.middleware import DEFAULT_MAX_CONCURRENT_SUBAGENTS
from deepactors.models import FunctionModel, ModelRequest
from tests.inflight import InFlight

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def subagent(name: str, model: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": name, "system_prompt": name, "model": model, **extra}


def parent_model(n: int) -> FunctionModel:
    """Asks for ``n`` children (briefs "0", "1", ...) in one answer, then ends."""

    def answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": str(i), "subagent_type": "w"})
                    for i in range(n)
                ]
            )
        return AssistantMessage(content="all merged")

    return FunctionModel(answer)


def brief(request: ModelRequest) -> str:
    return request.messages[0].text


async def test_the_default_cap_binds_a_wider_fan_out() -> None:
    """The first ``DEFAULT`` children wait for each other: without a cap, more would arrive."""
    cap = DEFAULT_MAX_CONCURRENT_SUBAGENTS
    active = peak = 0
    full = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if active >= cap:
            full.set()
        await full.wait()
        active -= 1
        return "ok"

    agent = create_deep_agent(
        parent_model(cap + 30), subagents=[subagent("w", FunctionModel(answer))]
    )
    with anyio.fail_after(60):
        result = await agent.ainvoke("go")
    assert peak == cap
    assert sum(isinstance(m, ToolMessage) for m in result["messages"]) == cap + 30


async def test_none_lifts_the_cap() -> None:
    n = 40
    arrived = 0
    everyone = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == n:
            everyone.set()
        await everyone.wait()  # only returns if all n work at once
        return "ok"

    agent = create_deep_agent(
        parent_model(n),
        subagents=[subagent("w", FunctionModel(answer))],
        max_concurrent_subagents=None,
    )
    with anyio.fail_after(30):
        result = await agent.ainvoke("go")
    assert result["messages"][-1].text == "all merged"


async def test_queued_calls_start_in_the_models_order_and_only_when_a_slot_frees() -> None:
    started: list[str] = []
    calls = InFlight()

    async def answer(request: ModelRequest) -> str:
        started.append(brief(request))
        await calls.work(0.005)
        return f"done {brief(request)}"

    agent = create_deep_agent(
        parent_model(12),
        subagents=[subagent("w", FunctionModel(answer))],
        max_concurrent_subagents=1,
    )
    stream = agent.astream("go")
    seen = [e async for e in stream]
    assert started == [str(i) for i in range(12)]
    assert calls.peak == 1
    # A queued call is not started: each ToolCallStarted of a task follows the
    # previous task's ToolCallFinished.
    marks = [
        type(e).__name__
        for e in seen
        if isinstance(e, events.ToolCallStarted | events.ToolCallFinished) and e.path == "main"
    ]
    assert marks == ["ToolCallStarted", "ToolCallFinished"] * 12
    assert stream.result is not None
    results = [m.text for m in stream.result["messages"] if isinstance(m, ToolMessage)]
    assert results == [f"done {i}" for i in range(12)]  # in call order


async def test_a_queued_childs_timeout_starts_when_it_starts() -> None:
    """40 children of 20 ms one at a time take 0.8 s; each has 0.5 s of its own."""
    agent = create_deep_agent(
        parent_model(40),
        subagents=[subagent("w", FunctionModel(lambda r: "ok", latency=0.02), timeout=0.5)],
        max_concurrent_subagents=1,
    )
    started = anyio.current_time()
    result = await agent.ainvoke("go")
    answers = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answers == ["ok"] * 40
    assert anyio.current_time() - started == pytest.approx(40 * 0.02)  # one at a time


async def test_other_tools_of_the_same_answer_are_not_held_by_the_cap() -> None:
    """Calls of an uncapped tool run at once beside the queued ``task`` calls."""
    gate = anyio.Event()
    order: list[str] = []

    async def lookup(q: str) -> str:
        """Look up.

        Args:
            q: The query.
        """
        order.append(f"lookup {q}")
        if q == "2":
            gate.set()  # the last lookup ran: child 0 may finish
        return q

    async def answer(request: ModelRequest) -> str:
        order.append(f"child {brief(request)}")
        if brief(request) == "0":
            await gate.wait()
        return "ok"

    def parent(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": str(i), "subagent_type": "w"})
                for i in range(3)
            ]
            calls += [ToolCall(name="lookup", args={"q": str(i)}) for i in range(3)]
            return AssistantMessage(tool_calls=calls)
        return AssistantMessage(content="done")

    agent = create_deep_agent(
        FunctionModel(parent),
        tools=[lookup],
        subagents=[subagent("w", FunctionModel(answer))],
        max_concurrent_subagents=1,
    )

    with anyio.fail_after(10):
        await agent.ainvoke("go")
    # Every lookup ran while child 0 held the only slot, before child 1 started.
    assert order.index("lookup 2") < order.index("child 1")


def test_a_cap_below_one_is_refused() -> None:
    from deepactors.errors import ConfigurationError

    worker = subagent("w", FunctionModel(lambda r: "ok"))
    with pytest.raises(ConfigurationError, match="at least 1"):
        create_deep_agent(parent_model(1), subagents=[worker], max_concurrent_subagents=0)

"""Deadlines that hold: a blocking sync tool cannot keep a run past its deadline.

A thread cannot be killed, so a sync tool still running at the deadline is left
behind (a stray thread, logged and capped); the run itself ends at the deadline.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest
import structlog

from deepactors import AssistantMessage, ScriptedModel, ToolCall, ToolMessage, create_deep_agent
from deepactors.tools import (
    MAX_STRAY_THREADS,
    stray_thread_statistics,
    tool,
    wait_for_stray_threads,
)
from tests.vtime import jump

pytestmark = pytest.mark.anyio


def calls(*names: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=n, args={}) for n in names])


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event a blocking tool waits on; always set at the end, so no thread lingers."""
    event = threading.Event()
    yield event
    event.set()


def blocking_tool(gate: threading.Event, entered: threading.Semaphore) -> Any:
    @tool(name="block")
    def block() -> str:
        """Block until the test lets go."""
        entered.release()
        gate.wait(10)
        return "let go"

    return block


async def cancel_once_entered(call: Any, entered: threading.Semaphore) -> None:
    """Run ``call()`` and cancel it once the tool's thread has started."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.to_thread.run_sync(entered.acquire)
        tg.cancel_scope.cancel()


async def no_strays_left() -> None:
    """Wait until stray threads (of earlier tests too) are gone: each ends within 5 s."""
    assert await anyio.to_thread.run_sync(wait_for_stray_threads, 10)


# On virtual time the deadline passes once the loop has waited on the blocked thread
# for the threshold (real time, so the tool's thread has surely entered the tool by then);
# a run that waited for the tool would end only once the test lets the thread go.
@pytest.mark.virtual_time(autojump_threshold=0.2)
async def test_a_blocking_sync_tool_cannot_hold_a_run_past_its_timeout(
    gate: threading.Event,
) -> None:
    await no_strays_left()
    entered = threading.Semaphore(0)
    agent = create_deep_agent(
        ScriptedModel([calls("block"), "done"]), tools=[blocking_tool(gate, entered)]
    )
    before = stray_thread_statistics()
    started = anyio.current_time()
    with pytest.raises(TimeoutError):
        await agent.ainvoke("go", timeout=1)
    assert anyio.current_time() - started == pytest.approx(1)
    assert not gate.is_set()
    assert stray_thread_statistics().total == before.total + 1  # the blocked tool, left behind
    assert stray_thread_statistics().running == 1


@pytest.mark.virtual_time(autojump_threshold=0.2)
async def test_the_callers_own_deadline_holds_too(gate: threading.Event) -> None:
    await no_strays_left()
    entered = threading.Semaphore(0)
    agent = create_deep_agent(
        ScriptedModel([calls("block"), "done"]), tools=[blocking_tool(gate, entered)]
    )
    started = anyio.current_time()
    with anyio.move_on_after(1) as scope:
        await agent.ainvoke("go")
    assert scope.cancelled_caught
    assert anyio.current_time() - started == pytest.approx(1)
    assert stray_thread_statistics().running == 1  # the run ended with the tool still blocked


@pytest.mark.virtual_time
async def test_a_zero_timeout_raises_even_with_a_model_that_never_waits() -> None:
    agent = create_deep_agent(ScriptedModel(["done"]))
    with pytest.raises(TimeoutError):
        await agent.ainvoke("go", timeout=0)


@pytest.mark.virtual_time
async def test_a_run_that_never_yields_still_does_not_finish_after_its_deadline() -> None:
    async def hog() -> str:
        """Hold the event loop for 0.3 s (a bug in the tool: nothing can interrupt it)."""
        jump(0.3)  # what a blocking call looks like to the (virtual) clock
        return "done hogging"

    # Without a check at each step, the deadline (never delivered: nothing yields
    # after the hog) would be missed and the run would return its result.
    agent = create_deep_agent(ScriptedModel([calls("hog"), "done"]), tools=[hog])
    with pytest.raises(TimeoutError):
        await agent.ainvoke("go", timeout=0.1)


async def test_a_stray_thread_is_logged_when_left_and_when_it_finishes(
    gate: threading.Event,
) -> None:
    await no_strays_left()
    entered = threading.Semaphore(0)
    agent = create_deep_agent(
        ScriptedModel([calls("block"), "done"]), tools=[blocking_tool(gate, entered)]
    )
    with structlog.testing.capture_logs() as logs:
        await cancel_once_entered(functools.partial(agent.ainvoke, "go"), entered)
        assert stray_thread_statistics().running == 1
        gate.set()
        await no_strays_left()
    left = [e for e in logs if e["event"].startswith("left a worker thread running")]
    late = [e for e in logs if e["event"].startswith("stray thread finished")]
    assert [(e["name"], e["log_level"]) for e in left] == [("block", "warning")]
    assert [(e["name"], e["outcome"]) for e in late] == [("block", "returned")]


async def test_stray_threads_are_capped_and_the_cap_is_an_error_result(
    gate: threading.Event,
) -> None:
    await no_strays_left()
    entered = threading.Semaphore(0)
    block = blocking_tool(gate, entered)
    for _ in range(MAX_STRAY_THREADS):
        await cancel_once_entered(functools.partial(block.call, {}), entered)
    assert stray_thread_statistics().running == MAX_STRAY_THREADS
    # One call more: refused as an error result the model reads, no thread started.
    agent = create_deep_agent(ScriptedModel([calls("block"), "done"]), tools=[block])
    with anyio.fail_after(5):
        result = await agent.ainvoke("go")
    answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error"
    assert f"{MAX_STRAY_THREADS} earlier calls of blocking tools were left running" in answer.text
    assert stray_thread_statistics().running == MAX_STRAY_THREADS
    # Once they end, sync tools run again.
    gate.set()
    await no_strays_left()
    agent = create_deep_agent(ScriptedModel([calls("block"), "done"]), tools=[block])
    with anyio.fail_after(5):
        result = await agent.ainvoke("go")
    answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert (answer.status, answer.text) == ("success", "let go")

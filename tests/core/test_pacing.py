"""Pacing (``deepactors._core.pacing``): a wave of actor steps leaves the loop turns to spare.

What is asserted is behaviour, not speed: whether another task gets turns
*during* a wave of steps, in what order parked steps go, and that nothing waits
for ever (a cancelled step, a pump that stopped). The figures (timer lateness at
10,000 subagents) are in ``bench/w2_fanout.py``.
"""

from __future__ import annotations

import math
import time

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from deepactors import AssistantMessage, ToolCall, ToolRuntime, create_deep_agent, open_runtime
from deepactors._core.pacing import Pacer
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def _busy(seconds: float) -> None:
    """Hold the loop like a step of real work does (no await inside)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _wave(pacer: Pacer | None, steps: int, each: float) -> int:
    """``steps`` tasks ready at once, each a paced step of ``each`` seconds of work;
    returns how many loop turns a bystander task got while they ran."""
    turns = 0
    done = anyio.Event()

    async def bystander() -> None:
        nonlocal turns
        while not done.is_set():
            await anyio.lowlevel.checkpoint()  # one loop turn each
            turns += 1

    async def step() -> None:
        if pacer is not None and pacer.due():
            await pacer.wait()
        _busy(each)

    async with anyio.create_task_group() as outer:
        if pacer is not None:
            outer.start_soon(pacer.run)
        outer.start_soon(bystander)
        await anyio.lowlevel.checkpoint()  # the pump and the bystander are under way
        start = turns
        async with anyio.create_task_group() as tg:
            for _ in range(steps):
                tg.start_soon(step)
        done.set()
        outer.cancel_scope.cancel()
    return turns - start


async def test_a_wave_of_steps_leaves_the_loop_turns_in_between() -> None:
    # 100 steps of 1 ms: unpaced, all run in one or two loop turns; paced at
    # 5 ms, the bystander gets a turn about every 5 steps.
    unpaced = await _wave(None, 100, 0.001)
    paced = await _wave(Pacer(0.005), 100, 0.001)
    assert unpaced <= 3
    assert paced >= 8


@pytest.mark.virtual_time  # the pacer's slices are CPU time (perf_counter), the sleeps loop turns
async def test_steps_without_contention_never_park() -> None:
    pacer = Pacer(0.005)
    parked = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(pacer.run)
        for _ in range(50):
            if pacer.due():
                parked += 1
                await pacer.wait()
            await anyio.sleep(0.001)  # each step alone in its turn
        tg.cancel_scope.cancel()
    assert parked == 0


async def test_steps_between_quiet_spells_leave_the_pump_asleep_while_the_slice_is_young() -> None:
    # An agent whose every step waits for a worker thread (a durable journal)
    # makes a quiet spell per step: the pump wakes once for the slice, not once
    # per spell (each wake costs a loop turn of its own).
    pacer = Pacer(3600.0)  # a slice that never grows old here
    wakes = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(pacer.run)
        await anyio.lowlevel.checkpoint()
        for _ in range(20):
            asleep = pacer._idle
            assert not pacer.due()
            wakes += asleep and not pacer._idle
            await anyio.to_thread.run_sync(time.sleep, 0)  # a quiet spell
            await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    assert wakes == 1  # the first step: the slice the pump was made with is old


async def _parking_wave(
    pacer: Pacer, n: int, scopes: dict[int, anyio.CancelScope] | None = None
) -> tuple[list[int], list[int]]:
    """``n`` steps that each work 1.5 ms, then ask; returns (parked, went) orders."""
    parked: list[int] = []
    went: list[int] = []

    async def step(i: int) -> None:
        with anyio.CancelScope() as scope:
            if scopes is not None:
                scopes[i] = scope
            _busy(0.0015)
            if pacer.due():
                parked.append(i)
                await pacer.wait()
            went.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(step, i)
        if scopes is not None:
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            for i in parked[2:4]:
                scopes[i].cancel()  # two that wait for their turn
    return parked, went


async def test_parked_steps_go_in_the_order_they_parked(anyio_backend_name: str) -> None:
    pacer = Pacer(0.001)
    async with anyio.create_task_group() as outer:
        outer.start_soon(pacer.run)
        await anyio.lowlevel.checkpoint()
        parked, went = await _parking_wave(pacer, 30)
        outer.cancel_scope.cancel()
    assert len(parked) >= 20  # 1.5 ms each against a 1 ms slice: nearly all wait
    assert sorted(went) == list(range(30))  # nobody is left behind
    released = [i for i in went if i in parked]
    if anyio_backend_name == "asyncio":
        assert released == parked  # let go first in, first out
    else:
        # trio lets them go in that order too, but runs each turn's tasks in
        # an order of its own choosing: only who went is certain.
        assert sorted(released) == sorted(parked)


async def test_a_cancelled_step_leaves_the_queue_and_the_rest_still_go() -> None:
    pacer = Pacer(0.001)
    scopes: dict[int, anyio.CancelScope] = {}
    async with anyio.create_task_group() as outer:
        outer.start_soon(pacer.run)
        await anyio.lowlevel.checkpoint()
        _, went = await _parking_wave(pacer, 20, scopes)
        outer.cancel_scope.cancel()
    cancelled = [i for i, scope in scopes.items() if scope.cancel_called]
    assert len(cancelled) == 2
    assert sorted(went + cancelled) == list(range(20))
    assert pacer.parked == 0


async def test_steps_parked_when_the_pump_stops_are_let_go(anyio_backend_name: str) -> None:
    pacer = Pacer(0.001)
    went = 0

    async def step() -> None:
        nonlocal went
        _busy(0.0015)
        if pacer.due():
            await pacer.wait()
        went += 1

    async with anyio.create_task_group() as tg, anyio.create_task_group() as pump:
        pump.start_soon(pacer.run)
        await anyio.lowlevel.checkpoint()
        for _ in range(5):
            tg.start_soon(step)
        await anyio.lowlevel.checkpoint()
        if anyio_backend_name == "asyncio":
            # asyncio runs a turn's tasks in order: the steps ran (the
            # first woke the pump, which has not ticked yet), the others wait.
            assert pacer.parked == 4
        pump.cancel_scope.cancel()  # whatever is parked now, the pump is gone
    assert went == 5
    # And from now on nothing paces: no step waits for a pump that is gone.
    _busy(0.002)
    assert not pacer.due()


@pytest.mark.parametrize("quantum", [0, -1.0, math.nan])
async def test_a_bad_quantum_is_refused(quantum: float) -> None:
    with pytest.raises(ValueError, match="quantum"):
        Pacer(quantum)
    with pytest.raises(ValueError, match="quantum"):
        async with open_runtime(pacing=quantum):
            pass


def _fan_out(n: int, work: float) -> object:
    """A main agent that asks ``n`` subagents at once; each child answers after
    ``work`` seconds of computing (a step that holds the loop)."""

    def child(request: ModelRequest) -> AssistantMessage:
        _busy(work)
        return AssistantMessage(content="done")

    def main(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": f"topic {i}", "subagent_type": "r"})
                for i in range(n)
            ]
            return AssistantMessage(tool_calls=calls)
        return AssistantMessage(content="all done")

    sub = {"name": "r", "description": "r", "system_prompt": "r", "model": FunctionModel(child)}
    return create_deep_agent(FunctionModel(main), subagents=[sub])


async def _fan_out_turns(pacing: float | None) -> int:
    agent = _fan_out(60, 0.001)
    turns = 0
    done = anyio.Event()

    async def bystander() -> None:
        nonlocal turns
        while not done.is_set():
            await anyio.lowlevel.checkpoint()
            turns += 1

    async with open_runtime(pacing=pacing) as rt, anyio.create_task_group() as tg:
        tg.start_soon(bystander)
        result = await rt.thread(agent).ainvoke("go")  # type: ignore[arg-type]
        done.set()
    assert result["messages"][-1].text == "all done"
    return turns


async def test_a_fan_out_under_a_runtime_leaves_the_loop_turns() -> None:
    # 60 children whose answers take 1 ms of computing each. Unpaced, their
    # answers come in one loop turn; paced at 5 ms, in about a dozen.
    unpaced = await _fan_out_turns(None)
    paced = await _fan_out_turns(0.005)
    assert paced >= unpaced + 8


async def test_a_wide_steps_results_land_in_slices_with_the_loop_turning_between() -> None:
    # 300 quick tool calls: their results are taken into the history a slice
    # per loop turn (here one slice per turn, the quantum being tiny), so
    # another task sees the history part way through; before, all of them
    # landed in one step, and nothing else ran meanwhile.
    n = 300
    seen: set[int] = set()
    held: list[object] = []

    async def probe(i: int, runtime: ToolRuntime) -> str:
        """Note the caller's state.

        Args:
            i: Which call.
        """
        held.append(runtime.state)
        return "ok"

    def answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return AssistantMessage(
                tool_calls=[ToolCall(name="probe", args={"i": i}) for i in range(n)]
            )
        return AssistantMessage(content="done")

    agent = create_deep_agent(FunctionModel(answer), tools=[probe])
    done = anyio.Event()

    async def watcher() -> None:
        while not done.is_set():
            if held:
                seen.add(len(held[0].messages))  # type: ignore[attr-defined]
            await anyio.lowlevel.checkpoint()

    async with open_runtime(pacing=1e-9) as rt, anyio.create_task_group() as tg:
        tg.start_soon(watcher)
        result = await rt.thread(agent).ainvoke("go")
        done.set()
    assert [m.role for m in result["messages"]][-1] == "assistant"
    assert len(result["messages"]) == n + 3  # the results all there, in call order
    calls = result["messages"][1].tool_calls
    assert [m.tool_call_id for m in result["messages"][2:-1]] == [c.id for c in calls]
    # Seen part way: more than one count between "no results" and "all of them".
    assert len({k for k in seen if 2 < k < n + 2}) >= 2

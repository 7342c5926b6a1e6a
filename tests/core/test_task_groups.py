"""The runtime's task group for many short tasks (``open_task_group``), on both loops.

On asyncio it is anyio's task group without the handle anyio 4.14+ gives every
task (``deepactors._core._asyncio_group``), on trio a bare nursery: these tests
hold them to what anyio's task group does (errors, cancel scopes, shields,
deadlines) and check that a waiting task carries no handle.
"""

from __future__ import annotations

import gc

import anyio
import anyio.lowlevel
import pytest

from deepactors._core.loops import open_task_group


def _handles() -> int:
    return sum(type(o).__name__ == "TaskHandle" for o in gc.get_objects())


async def test_a_waiting_task_carries_no_handle() -> None:
    # (anyio's own task group on asyncio keeps a TaskHandle per task: a cancel
    # scope, an event and its deque, a wrapper coroutine: ~2.4 KiB a task.)
    # Handles of the runner's or earlier tests' tasks may be freed meanwhile
    # (one was, in a CI run): none may be added.
    gc.collect()
    before = _handles()
    async with open_task_group() as tg:
        for _ in range(50):
            tg.start_soon(anyio.sleep, 0)
        assert _handles() <= before
    assert _handles() <= before


async def test_every_task_runs_and_the_group_waits_for_them() -> None:
    done: list[int] = []

    async def one(i: int) -> None:
        await anyio.lowlevel.checkpoint()
        done.append(i)

    async with open_task_group() as tg:
        for i in range(20):
            tg.start_soon(one, i)
    assert sorted(done) == list(range(20))


async def test_an_error_cancels_the_siblings_and_leaves_the_group() -> None:
    cancelled: list[str] = []

    async def sibling() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append("sibling")
            raise

    async def failing() -> None:
        await anyio.wait_all_tasks_blocked()
        raise ValueError("boom")

    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="boom"), flatten_subgroups=True):
        async with open_task_group() as tg:
            tg.start_soon(sibling)
            tg.start_soon(failing)
    assert cancelled == ["sibling"]


async def test_an_outer_cancel_reaches_the_tasks_but_not_their_shielded_work() -> None:
    finished: list[str] = []
    cancelled = anyio.Event()

    async def shielded() -> None:
        with anyio.CancelScope(shield=True):
            await cancelled.wait()  # the outer cancel comes meanwhile
            finished.append("shielded")
        await anyio.sleep_forever()

    async def plain() -> None:
        await anyio.sleep_forever()
        finished.append("never")

    with anyio.fail_after(5), anyio.CancelScope() as outer:
        async with open_task_group() as tg:
            tg.start_soon(shielded)
            tg.start_soon(plain)
            await anyio.wait_all_tasks_blocked()
            outer.cancel()
            cancelled.set()
    assert outer.cancelled_caught
    assert finished == ["shielded"]


async def test_a_deadline_outside_the_group_ends_its_tasks() -> None:
    reached: list[float] = []

    async def waits() -> None:
        reached.append(anyio.current_effective_deadline())
        await anyio.sleep_forever()

    with anyio.fail_after(5), anyio.move_on_after(0.05) as scope:
        async with open_task_group() as tg:
            tg.start_soon(waits)
            tg.start_soon(waits)
    assert scope.cancelled_caught
    assert reached == [scope.deadline, scope.deadline]  # the tasks see the outer deadline


async def test_a_scope_a_task_opens_ends_that_task_alone() -> None:
    events: list[str] = []
    gave_up = anyio.Event()

    async def gives_up() -> None:
        with anyio.move_on_after(0):
            await anyio.sleep_forever()
        events.append("gave up")
        gave_up.set()

    async def carries_on() -> None:
        await gave_up.wait()  # a wait the other task's scope must not cut short
        events.append("carried on")

    with anyio.fail_after(5):
        async with open_task_group() as tg:
            tg.start_soon(gives_up)
            tg.start_soon(carries_on)
    assert events == ["gave up", "carried on"]

"""Thread leases, the same for every checkpointer: one holder per thread, in turn.

Across processes (SQLite) see ``test_sqlite_leases.py`` and ``tests/crash``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from deepactors.errors import ThreadBusy
from deepactors.persistence import Checkpointer, CheckpointWrite

from .test_sqlite_threads import backend_of, run_in_threads


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


async def test_holders_of_one_thread_take_turns_in_arrival_order(
    checkpointer: Checkpointer,
) -> None:
    log: list[str] = []

    async def run(name: str) -> None:
        async with checkpointer.lease("t"):
            log.append(f"{name} in")
            for _ in range(3):
                await anyio.lowlevel.checkpoint()  # others get every chance to barge in
            log.append(f"{name} out")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg, checkpointer.lease("t"):
            for name in "abcd":
                tg.start_soon(run, name)
                await anyio.wait_all_tasks_blocked()  # queued in this order
            assert log == []  # all waiting while the thread is held
    assert log == [f"{n} {e}" for n in "abcd" for e in ("in", "out")]


async def test_other_threads_are_not_held_up(checkpointer: Checkpointer) -> None:
    with anyio.fail_after(5):
        async with checkpointer.lease("a"), checkpointer.lease("b") as b:
            assert b.thread_id == "b"
            assert b.waited < 1


async def test_the_lease_tells_the_thread_head_when_taken(checkpointer: Checkpointer) -> None:
    async with checkpointer.lease("t") as first:
        assert first.head == 0
        await checkpointer.put("t", [write(0), write(0)])
        await checkpointer.put("t", [write(1)])
    async with checkpointer.lease("t") as second:
        assert second.head == 3
        assert second.owner != first.owner


async def test_a_holder_that_fails_still_gives_the_thread_back(
    checkpointer: Checkpointer,
) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        async with checkpointer.lease("t"):
            raise RuntimeError("boom")
    with anyio.fail_after(5):
        async with checkpointer.lease("t") as lease:
            assert lease.waited < 1


async def test_a_waiter_cancelled_takes_nothing_and_the_next_gets_the_turn(
    checkpointer: Checkpointer,
) -> None:
    got: list[str] = []

    async def take(name: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            async with checkpointer.lease("t"):
                got.append(name)

    impatient = anyio.CancelScope()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg, checkpointer.lease("t"):
            tg.start_soon(take, "impatient", impatient)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(take, "patient")
            await anyio.wait_all_tasks_blocked()
            impatient.cancel()
            await anyio.wait_all_tasks_blocked()
    assert got == ["patient"]


async def test_waiting_counts_against_the_callers_deadline(checkpointer: Checkpointer) -> None:
    async with checkpointer.lease("t"):
        with anyio.move_on_after(0.05) as scope:
            async with checkpointer.lease("t"):
                pytest.fail("took a held thread")
        assert scope.cancelled_caught
    async with checkpointer.lease("t") as lease:  # nothing was left behind
        assert lease.waited < 1


async def test_a_checkpointer_told_not_to_wait_raises_thread_busy(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer(when_busy="raise") as cp:
        async with cp.lease("t"):
            with pytest.raises(ThreadBusy) as info:
                async with cp.lease("t"):
                    pytest.fail("took a held thread")
            assert info.value.thread_id == "t"
            assert "'t'" in str(info.value)
            async with cp.lease("other"):  # another thread is free
                pass
        async with cp.lease("t"):  # and so is this one, now
            pass


def test_runs_in_several_event_loops_and_threads_take_turns(
    anyio_backend: Any, make_checkpointer: Callable[..., Checkpointer]
) -> None:
    # One checkpointer shared by threads each running its own loop (the sync
    # ``invoke`` from a threaded server): the lease still admits one at a time.
    backend, options = backend_of(anyio_backend)
    cp = make_checkpointer()
    inside = 0
    most = 0
    lock = threading.Lock()
    start = threading.Barrier(4)

    def runner(who: str) -> Callable[[], Any]:
        async def job() -> None:
            nonlocal inside, most
            await anyio.to_thread.run_sync(start.wait, 10)
            for i in range(10):
                async with cp.lease("t") as lease:
                    with lock:
                        inside += 1
                        most = max(most, inside)
                    await cp.put("t", [write(i, who=who, head=lease.head)])
                    await anyio.lowlevel.checkpoint()
                    with lock:
                        inside -= 1

        return job

    others = ["asyncio", "trio", backend]
    run_in_threads(
        [(backend, options, runner("main"))]
        + [(b, options if b == backend else {}, runner(f"t{i}")) for i, b in enumerate(others)]
    )
    assert most == 1

    async def read() -> list[Any]:
        async with cp:
            return await cp.read("t")

    records = anyio.run(read, backend=backend, backend_options=options)
    # Every holder saw the head the one before it left: no write slipped between.
    assert [r.data["head"] for r in records] == list(range(40))

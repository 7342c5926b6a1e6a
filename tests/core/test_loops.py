"""The event-loop seam (``deepactors._core.loops``): runs, wake-ups and per-run resources.

Sync tests drive ``anyio.run`` themselves, on asyncio and trio (the
``anyio_backend`` params), one run after another or in threads at once: what
the sync ``invoke`` of a threaded server does.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import sniffio

from deepactors._core.loops import (
    LoopRun,
    UnsupportedLoop,
    Wakeup,
    current_run,
    current_run_or_none,
    latch,
    loop_running_here,
)
from deepactors._core.perloop import PerLoop


def backend_of(anyio_backend: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(anyio_backend, tuple):
        return anyio_backend[0], dict(anyio_backend[1])
    return anyio_backend, {}


class Resource:
    def __init__(self, n: int) -> None:
        self.n = n
        self.closed_by: str | None = None


class Ledger:
    """Opens numbered resources and records how each was closed."""

    def __init__(self) -> None:
        self.opened: list[Resource] = []

    async def open(self) -> Resource:
        await anyio.lowlevel.checkpoint()  # a real open awaits: first uses must share it
        resource = Resource(len(self.opened))
        self.opened.append(resource)
        return resource

    async def close(self, resource: Resource) -> None:
        assert resource.closed_by is None, "closed twice"
        resource.closed_by = "its run"

    async def close_stale(self, resource: Resource) -> None:
        assert resource.closed_by is None, "closed twice"
        resource.closed_by = "a later run"

    def holder(self) -> PerLoop[Resource]:
        return PerLoop(self.open, self.close, close_stale=self.close_stale)


async def test_current_run_names_this_loop_and_is_not_over() -> None:
    run = current_run()
    assert run.library == sniffio.current_async_library()
    assert run == current_run() == current_run_or_none()
    assert run.is_current()
    assert not run.is_over()
    assert current_run_or_none() is not None


def test_outside_a_loop_there_is_no_run() -> None:
    assert current_run_or_none() is None


def test_another_async_library_is_refused() -> None:
    token = sniffio.current_async_library_cvar.set("curio")
    try:
        with pytest.raises(UnsupportedLoop, match="asyncio or trio, not on curio"):
            current_run()
        assert current_run_or_none() is None
    finally:
        sniffio.current_async_library_cvar.reset(token)


def test_a_run_is_over_once_it_has_ended(anyio_backend: Any) -> None:
    backend, options = backend_of(anyio_backend)

    async def main() -> LoopRun:
        return current_run()

    run = anyio.run(main, backend=backend, backend_options=options)
    assert run.is_over()
    assert not run.call_soon(lambda: None)


async def test_a_wakeup_set_from_another_thread_wakes_its_waiter() -> None:
    wakeup = Wakeup()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wakeup.wait)
            await anyio.wait_all_tasks_blocked()
            assert await anyio.to_thread.run_sync(wakeup.set)


def test_a_wakeup_of_an_ended_run_says_nobody_will_see_it(anyio_backend: Any) -> None:
    backend, options = backend_of(anyio_backend)

    async def main() -> Wakeup:
        return Wakeup()

    assert not anyio.run(main, backend=backend, backend_options=options).set()


async def test_first_uses_in_one_run_share_one_opening() -> None:
    ledger = Ledger()
    holder = ledger.holder()
    got: list[Resource] = []

    async def use() -> None:
        got.append(await holder.get())

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(use)
    assert len(ledger.opened) == 1
    assert {id(r) for r in got} == {id(ledger.opened[0])}
    await holder.aclose()
    assert ledger.opened[0].closed_by == "its run"
    assert len(holder) == 0
    assert (await holder.get()).n == 1  # not final: a later use opens anew
    await holder.aclose()


def test_each_run_gets_its_own_closed_as_the_run_ends(anyio_backend: Any) -> None:
    backend, options = backend_of(anyio_backend)
    ledger = Ledger()
    holder = ledger.holder()

    async def main() -> int:
        return (await holder.get()).n

    other = "trio" if backend == "asyncio" else "asyncio"
    assert anyio.run(main, backend=backend, backend_options=options) == 0
    assert anyio.run(main, backend=other) == 1
    assert anyio.run(main, backend=backend, backend_options=options) == 2
    assert [r.closed_by for r in ledger.opened] == ["its run"] * 3
    assert len(holder) == 0


def test_one_left_by_a_loop_closed_without_cleanup_goes_to_close_stale(
    anyio_backend: Any,
) -> None:
    backend, options = backend_of(anyio_backend)
    ledger = Ledger()
    holder = ledger.holder()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(holder.get())
    finally:
        # A careless host: the closer task is dropped, never run.
        for task in asyncio.all_tasks(loop):
            task.cancel()
            task._log_destroy_pending = False  # type: ignore[attr-defined]
        loop.close()
    assert ledger.opened[0].closed_by is None

    async def main() -> int:
        return (await holder.get()).n

    assert anyio.run(main, backend=backend, backend_options=options) == 1
    assert [r.closed_by for r in ledger.opened] == ["a later run", "its run"]


def test_closing_in_one_thread_leaves_another_threads_run_alone(anyio_backend: Any) -> None:
    backend, options = backend_of(anyio_backend)
    ledger = Ledger()
    holder = ledger.holder()
    opened = threading.Barrier(2)
    closed = threading.Event()
    seen: dict[str, Resource] = {}

    async def keeper() -> None:
        seen["keeper"] = await holder.get()
        await anyio.to_thread.run_sync(opened.wait, 10)
        await anyio.to_thread.run_sync(closed.wait, 10)
        # Still its own, still open, after the other thread's aclose.
        assert await holder.get() is seen["keeper"]
        assert seen["keeper"].closed_by is None

    async def closer() -> None:
        seen["closer"] = await holder.get()
        await anyio.to_thread.run_sync(opened.wait, 10)
        await holder.aclose()
        closed.set()

    errors: list[BaseException] = []

    def run(job: Any) -> None:
        try:
            anyio.run(job, backend=backend, backend_options=options)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in (keeper, closer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert seen["keeper"] is not seen["closer"]
    assert [r.closed_by for r in ledger.opened] == ["its run", "its run"]


def test_a_loop_runs_here_inside_tasks_and_asyncio_callbacks(anyio_backend: Any) -> None:
    seen: list[bool] = []

    async def main() -> None:
        seen.append(loop_running_here())
        if sniffio.current_async_library() == "asyncio":
            # A callback runs outside any task, where sniffio sees no library.
            done = asyncio.Event()
            asyncio.get_running_loop().call_soon(
                lambda: (seen.append(loop_running_here()), done.set())
            )
            await done.wait()

    assert not loop_running_here()
    name, options = backend_of(anyio_backend)
    anyio.run(main, backend=name, backend_options=options)
    assert seen == ([True, True] if name == "asyncio" else [True])
    assert not loop_running_here()  # the run has ended


async def test_a_latch_wakes_its_waiter_once_set_and_stays_set() -> None:
    done = latch()
    order: list[str] = []

    async def waiter() -> None:
        await done.wait()
        order.append("woken")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert order == []
        assert not done.is_set()
        done.set()
        order.append("set")
    assert order == ["set", "woken"]
    with anyio.fail_after(1):
        await done.wait()  # set already: at once (after a checkpoint)
    assert done.is_set()


async def test_a_latch_waiter_cancelled_leaves_it_usable() -> None:
    done = latch()
    with anyio.move_on_after(0.01) as scope:
        await done.wait()
    assert scope.cancelled_caught
    done.set()  # nobody waits: nothing to wake, and no error
    with anyio.fail_after(1):
        await done.wait()

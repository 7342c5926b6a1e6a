"""The one seam between the library and the event loop it runs on: asyncio or trio.

Everything else in deepactors is written against anyio; what anyio does not
spell loop-agnostically lives here, so no other module (drivers such as the
aiosqlite adapter aside) needs to know which loop it is on:

- :func:`current_run` names the event-loop *run* the caller is in (an asyncio
  loop, a trio run), and :class:`LoopRun` tells from any thread whether that run
  is over and schedules a call into it (:meth:`LoopRun.call_soon`).
- :func:`spawn_system_task` starts a task of the current run that no task group
  owns and that the run cancels as it ends.
- :class:`Wakeup` is an event of one run that any thread may set.
- :func:`open_task_group` is a task group for many short tasks: on trio a bare
  nursery, on asyncio anyio's task group without the handle it gives every task
  (``_asyncio_group``): either way, without the cancel scope, event and wrapper
  coroutine anyio adds to every task (at 10,000 subagents, ~10 objects per
  child that the garbage collector walks, and a cancel scope entered and left
  each; ~2.4 KiB per waiting task on asyncio).
- ``trio_loop.CallThread`` is a thread of its own that runs blocking calls one
  at a time for a trio run: one wakeup per call, a third of the CPU of
  ``anyio.to_thread.run_sync`` (~60 us against ~180 us per call here).
- :func:`parking_lot` parks tasks in FIFO order until woken ``n`` at a time:
  trio's ``ParkingLot``, or one future per task on asyncio (an ``anyio.Event``
  per waiter would cost an event object and a deque more each).
- :func:`latch` is a one-shot event for one waiting task: a future on asyncio,
  the task rescheduled on trio (what a parent waiting on each of 100,000
  children keeps per child).

One object (a checkpointer, a model) may be used by successive ``anyio.run``
calls, on asyncio then trio, and by several threads each running its own loop at
once (the sync ``invoke`` called from a threaded web server): that is why
resources are kept per run rather than per object
(:class:`~deepactors._core.perloop.PerLoop`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Protocol, TypeVar, TypeVarTuple

import anyio
import anyio.lowlevel
import sniffio

from ..errors import UnsupportedLoop
from ._asyncio_group import lean_task_group

__all__ = [
    "LoopRun",
    "Lot",
    "Spawner",
    "UnsupportedLoop",
    "Wakeup",
    "current_run",
    "current_run_or_none",
    "loop_running_here",
    "open_task_group",
    "parking_lot",
    "spawn_system_task",
]

T = TypeVar("T")
PosArgsT = TypeVarTuple("PosArgsT")


@dataclass(frozen=True, slots=True)
class LoopRun:
    """One event-loop run: hashable, comparable, usable from any thread.

    Attributes:
        library: ``"asyncio"`` or ``"trio"``.
        native: The asyncio loop, or the run's ``trio.lowlevel.TrioToken``.
    """

    library: str
    # Compared and hashed by identity (neither type defines __eq__), and kept
    # alive by this record, so a key can never match a later loop at its address.
    native: object

    def is_over(self) -> bool:
        """Whether the run has ended for good (safe to ask from any thread)."""
        if isinstance(self.native, asyncio.AbstractEventLoop):
            return self.native.is_closed()
        import trio  # loaded: this run is trio's

        assert isinstance(self.native, trio.lowlevel.TrioToken)
        try:
            # Thread-safe, and refused exactly when the run has finished.
            self.native.run_sync_soon(_nothing)
        except trio.RunFinishedError:
            return True
        return False

    def call_soon(self, fn: Callable[[], object]) -> bool:
        """Schedule ``fn()`` in this run from any thread, without waiting for it.

        Returns:
            False when the run is over, so ``fn`` will never be called.
        """
        try:
            if isinstance(self.native, asyncio.AbstractEventLoop):
                self.native.call_soon_threadsafe(fn)
            else:
                import trio  # loaded: this run is trio's

                assert isinstance(self.native, trio.lowlevel.TrioToken)
                self.native.run_sync_soon(fn)
        except RuntimeError:  # a closed asyncio loop; trio.RunFinishedError
            return False
        return True

    def is_current(self) -> bool:
        """Whether the caller is running in this run (in its loop's thread)."""
        return current_run_or_none() == self


def _nothing() -> None:
    pass


def current_run() -> LoopRun:
    """The event-loop run the caller is in.

    Raises:
        UnsupportedLoop: The async library is neither asyncio nor trio.
        sniffio.AsyncLibraryNotFoundError: No async library is running here.
    """
    library = sniffio.current_async_library()
    if library == "asyncio":
        return LoopRun("asyncio", asyncio.get_running_loop())
    if library == "trio":
        import trio.lowlevel  # loaded: trio is running

        return LoopRun("trio", trio.lowlevel.current_trio_token())
    raise UnsupportedLoop(f"deepactors runs on asyncio or trio, not on {library}")


def current_run_or_none() -> LoopRun | None:
    """:func:`current_run`, or None when the caller is not in an asyncio or trio run."""
    try:
        return current_run()
    except (sniffio.AsyncLibraryNotFoundError, UnsupportedLoop, RuntimeError):
        return None


def loop_running_here() -> bool:
    """Whether an event loop runs in this thread, even outside any task.

    asyncio's ``get_running_loop`` answers in a loop's callbacks too (where
    sniffio sees no task); trio's token exists only on trio's own thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return True
    if "trio" not in sys.modules:
        return False  # no trio run without trio imported
    import trio.lowlevel

    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


class Spawner(Protocol):
    """What :func:`open_task_group` yields: it starts tasks, and that is all."""

    def start_soon(
        self, fn: Callable[[*PosArgsT], Coroutine[object, object, object]], /, *args: *PosArgsT
    ) -> object:
        """Start ``fn(*args)`` as a task of the group."""
        ...


def open_task_group() -> contextlib.AbstractAsyncContextManager[Spawner]:
    """A task group for many short tasks that need no handle (see the module docstring).

    Cancellation and errors behave as in ``anyio.create_task_group()``.
    """
    if sniffio.current_async_library() == "trio":
        from .trio_loop import TrioGroup

        return TrioGroup()
    return lean_task_group()


class Lot(Protocol):
    """What :func:`parking_lot` returns: tasks wait in it in FIFO order."""

    def __len__(self) -> int:
        """How many tasks are parked."""
        ...

    async def park(self) -> None:
        """Wait until woken by :meth:`unpark` (or cancelled)."""
        ...

    def unpark(self, *, count: int) -> object:
        """Wake the ``count`` longest-parked tasks (fewer if fewer wait)."""
        ...


class _FutureLot:
    """A parking lot on asyncio: a deque of futures, each resolved to wake its task."""

    __slots__ = ("_loop", "_parked")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._parked: collections.deque[asyncio.Future[None]] = collections.deque()

    def __len__(self) -> int:
        return len(self._parked)

    async def park(self) -> None:
        future = self._loop.create_future()
        self._parked.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if not future.done():  # still parked: leave the queue
                with contextlib.suppress(ValueError):
                    self._parked.remove(future)
            raise

    def unpark(self, *, count: int) -> None:
        parked = self._parked
        while count > 0 and parked:
            future = parked.popleft()
            if not future.done():  # a waiter cancelled meanwhile is skipped
                future.set_result(None)
                count -= 1


def parking_lot() -> Lot:
    """A FIFO parking lot for the current run's tasks (see the module docstring)."""
    if sniffio.current_async_library() == "trio":
        import trio.lowlevel

        return trio.lowlevel.ParkingLot()
    return _FutureLot()


class Latch(Protocol):
    """What :func:`latch` returns: set once, awaited by one task at a time."""

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        ...

    def set(self) -> None:
        """Set it, waking the task waiting (from the run's own thread)."""
        ...

    def wait(self) -> Awaitable[None]:
        """Wait until it is set (at once, after a checkpoint, when it is)."""
        ...


class _FutureLatch:
    """A latch on asyncio: one future, made when a task waits."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wait(self) -> Awaitable[None]:
        # The future itself is awaited: no coroutine frame per waiting task. A
        # waiter cancelled leaves it cancelled (done), which set() skips.
        if self._set:
            return anyio.lowlevel.checkpoint()
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        return waiter


def latch() -> Latch:
    """A one-shot event for one waiter, for the current run (see the module docstring).

    What ``anyio.Event`` does for a task that waits for one thing to happen,
    without its cost: on asyncio an ``anyio.Event`` is two objects, a deque of
    waiters and two coroutines while waited on, kept per waiting task, which a
    parent holding 100,000 children's waits pays 100,000 times.
    """
    if sniffio.current_async_library() == "trio":
        from .trio_loop import TrioLatch

        return TrioLatch()
    return _FutureLatch()


# asyncio keeps only weak references to tasks; these must outlive their creator.
_asyncio_system_tasks: set[asyncio.Task[None]] = set()


def spawn_system_task(fn: Callable[[], Coroutine[object, object, None]]) -> None:
    """Start ``fn()`` as a task of the current run that no task group owns.

    The run cancels it as it ends (trio cancels system tasks when its main task
    returns; ``asyncio.run`` and anyio's runner cancel leftover tasks before
    closing the loop), so its ``finally`` is where a run-scoped resource is
    closed. It must not raise: on trio that would crash the run.
    """
    run = current_run()
    if run.library == "trio":
        import trio.lowlevel

        trio.lowlevel.spawn_system_task(fn)
        return
    task = asyncio.get_running_loop().create_task(fn())
    _asyncio_system_tasks.add(task)
    task.add_done_callback(_asyncio_system_tasks.discard)


class Wakeup:
    """An event of the run that made it, which any thread may :meth:`set`.

    Made by the task that will wait on it; ``set`` from that run's own thread
    sets it at once, from anywhere else it is scheduled into the run.
    """

    def __init__(self) -> None:
        self.run = current_run()
        self._event = anyio.Event()

    async def wait(self) -> None:
        """Wait until :meth:`set` has been called (and has reached this run)."""
        await self._event.wait()

    def set(self) -> bool:
        """Set the event, from any thread.

        Returns:
            False when the waiting run is over: nobody will ever see it.
        """
        if self.run.is_current():
            self._event.set()
            return True
        return self.run.call_soon(self._event.set)

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
- :class:`PerLoop` holds one resource per live event-loop run (a database
  connection, an HTTP client), opened lazily on first use in that run and closed
  by that run as it ends.

One object (a checkpointer, a model) may be used by successive ``anyio.run``
calls, on asyncio then trio, and by several threads each running its own loop at
once (the sync ``invoke`` called from a threaded web server): that is why
resources are kept per run rather than per object.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel
import sniffio
import trio
import trio.lowlevel

__all__ = [
    "LoopRun",
    "PerLoop",
    "UnsupportedLoop",
    "Wakeup",
    "current_run",
    "current_run_or_none",
    "loop_running_here",
    "spawn_system_task",
]

T = TypeVar("T")


class UnsupportedLoop(RuntimeError):
    """The running async library is neither asyncio nor trio."""


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
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


# asyncio keeps only weak references to tasks; these must outlive their creator.
_asyncio_system_tasks: set[asyncio.Task[None]] = set()


def spawn_system_task(fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Start ``fn()`` as a task of the current run that no task group owns.

    The run cancels it as it ends (trio cancels system tasks when its main task
    returns; ``asyncio.run`` and anyio's runner cancel leftover tasks before
    closing the loop), so its ``finally`` is where a run-scoped resource is
    closed. It must not raise: on trio that would crash the run.
    """
    run = current_run()
    if run.library == "trio":
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


@dataclass(slots=True, kw_only=True)
class _Slot(Generic[T]):
    """One run's resource: being opened while ``resource`` is None."""

    opening: anyio.Event
    resource: T | None = None
    retire: anyio.Event | None = None  # set by aclose(): the closer task may end


class PerLoop(Generic[T]):
    """One resource per live event-loop run, opened lazily, closed by its run.

    :meth:`get` returns the current run's resource, opening it on first use
    (concurrent first uses in one run wait for one opening). When the run ends,
    a system task of that run closes it with ``close``, while the run's loop can
    still do so. A resource whose run ended without that cleanup (a loop closed
    without cancelling its tasks) is handed to ``close_stale`` by the next run
    that opens one, or dropped when there is no ``close_stale``. A resource is
    only ever closed by its own run or once its run is over, never under another
    live run.

    The slots are shared by the threads of every live run; each run adds, reads
    and removes only its own slot, and a slot whose run is over is claimed with a
    single ``pop``. Single dict operations are atomic in CPython, so no lock is
    needed (a lock would be a blocking call on the event loop).

    Args:
        open: Makes the current run's resource.
        close: Closes a resource, in its own run. Exceptions are swallowed at
            the run's end (nothing can be done then), raised from :meth:`aclose`.
        close_stale: Closes a resource whose run is over, from another run.
    """

    def __init__(
        self,
        open: Callable[[], Awaitable[T]],
        close: Callable[[T], Awaitable[None]],
        *,
        close_stale: Callable[[T], Awaitable[None]] | None = None,
    ) -> None:
        self._open = open
        self._close = close
        self._close_stale = close_stale
        self._slots: dict[LoopRun, _Slot[T]] = {}

    def __len__(self) -> int:
        """How many runs hold a resource (or are opening one) now."""
        return len(self._slots)

    async def get(self) -> T:
        """The current run's resource, opened now if it has none.

        Raises:
            UnsupportedLoop: Not on asyncio or trio.
            Exception: Whatever ``open`` raised; the next call tries again.
        """
        run = current_run()
        while True:
            slot = self._slots.get(run)
            if slot is None:
                slot = _Slot[T](opening=anyio.Event())
                self._slots[run] = slot
                break
            if slot.resource is not None:
                return slot.resource
            # Another task of this run is opening it: wait, then look again.
            await slot.opening.wait()
        try:
            await self._release_stale()
            resource = await self._open()
            slot.resource, slot.retire = resource, anyio.Event()
            self._spawn_closer(run, slot)
            return resource
        except BaseException:
            self._forget(run, slot)
            raise
        finally:
            slot.opening.set()

    def _forget(self, run: LoopRun, slot: _Slot[T]) -> None:
        # Only this run removes its live slot, so nothing can slip in between.
        if self._slots.get(run) is slot:
            del self._slots[run]

    def _spawn_closer(self, run: LoopRun, slot: _Slot[T]) -> None:
        async def close_at_run_end() -> None:
            assert slot.retire is not None
            assert slot.resource is not None
            try:
                await slot.retire.wait()
            finally:
                # Cancelled as the run ends, and trio keeps cancelling: shield.
                with anyio.CancelScope(shield=True):
                    if not slot.retire.is_set():
                        self._forget(run, slot)
                        # An error escaping a trio system task would crash the run,
                        # and at the run's end nobody is left to tell.
                        with contextlib.suppress(Exception):
                            await self._close(slot.resource)

        spawn_system_task(close_at_run_end)

    async def _release_stale(self) -> None:
        """Close the resources of runs that ended without closing them."""
        stale: list[T] = []
        for run, slot in self._slots.copy().items():
            if slot.resource is None or not run.is_over():
                continue
            # pop claims the slot: two threads sweeping at once close it only once.
            if self._slots.pop(run, None) is slot:
                stale.append(slot.resource)
        if self._close_stale is None:
            return
        with anyio.CancelScope(shield=True):
            for resource in stale:
                await self._close_stale(resource)

    async def aclose(self) -> None:
        """Close the current run's resource now, if any, and those of ended runs.

        Resources of other live runs (other threads) stay open; a later
        :meth:`get` opens a new one.
        """
        run = current_run_or_none()
        slot = None if run is None else self._slots.get(run)
        if run is not None and slot is not None and slot.resource is not None:
            self._forget(run, slot)
            assert slot.retire is not None
            slot.retire.set()  # the closer task ends without closing it again
            with anyio.CancelScope(shield=True):
                await self._close(slot.resource)
        await self._release_stale()
        await anyio.lowlevel.checkpoint()

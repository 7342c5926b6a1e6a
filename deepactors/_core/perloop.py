"""One resource per live event-loop run: :class:`PerLoop`.

A database connection or an HTTP client belongs to the event-loop run that
opened it, yet one object (a checkpointer, a model) may be used by successive
``anyio.run`` calls, on asyncio then trio, and by several threads each running
its own loop at once. :class:`PerLoop` opens the resource lazily in each run,
and that run closes it as it ends (:mod:`deepactors._core.loops` says how a run is
named and how its end is seen).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

from .loops import LoopRun, current_run, current_run_or_none, spawn_system_task

__all__ = ["PerLoop"]

T = TypeVar("T")


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

    def ready(self) -> T | None:
        """The current run's resource if it is open, else None (:meth:`get` opens it).

        Raises:
            UnsupportedLoop: Not on asyncio or trio.
        """
        slot = self._slots.get(current_run())
        return None if slot is None else slot.resource

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

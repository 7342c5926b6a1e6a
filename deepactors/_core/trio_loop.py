"""The trio side of the loop seam (:mod:`deepactors._core.loops`).

Imported by the seam only once it meets a trio run, so a process that runs on
asyncio alone (a uvicorn server, a script) never imports trio.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.lowlevel
import trio
import trio.lowlevel

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["CallThread", "TrioGroup", "TrioLatch"]

T = TypeVar("T")


class TrioGroup:
    """A trio nursery that leaves like anyio's task group does."""

    __slots__ = ("_manager",)

    def __init__(self) -> None:
        self._manager = trio.open_nursery()

    async def __aenter__(self) -> trio.Nursery:
        return await self._manager.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return bool(await self._manager.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            # Only cancellations: one Cancelled, as anyio raises, so that code
            # above sees what it would see with anyio's task group.
            if group.split(trio.Cancelled)[1] is None:
                raise _first_leaf(group) from group
            raise
        finally:
            del exc, tb


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class TrioLatch:
    """A latch on trio: the waiting task, rescheduled when it is set."""

    __slots__ = ("_set", "_task")

    def __init__(self) -> None:
        self._set = False
        self._task: trio.lowlevel.Task | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def wait(self) -> Awaitable[None]:
        # trio's own wait is returned, awaited by the caller at once (as the
        # asyncio latch's future is): no coroutine frame of ours and no closure
        # per waiting task.
        if self._set:
            return anyio.lowlevel.checkpoint()
        self._task = trio.lowlevel.current_task()
        return trio.lowlevel.wait_task_rescheduled(self._abort)  # noqa: ASYNC105 (see above)

    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


def _refuse_abort(raise_cancel: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


class _Call:
    """One call handed to a :class:`CallThread`, and what came of it."""

    __slots__ = ("error", "fn", "result", "task")

    def __init__(self, fn: Callable[[], Any], task: trio.lowlevel.Task) -> None:
        self.fn = fn
        self.task = task
        self.result: Any = None
        self.error: BaseException | None = None


class CallThread:
    """A thread that runs blocking calls one at a time for the trio run that made it.

    A call is not abandoned when its caller is cancelled (what it started, a
    transaction say, finishes in the thread); the caller gets the cancellation
    at its next checkpoint after that, as with ``anyio.to_thread.run_sync``.
    Calls queue in order. :meth:`stop` lets the thread end after the queued calls.
    """

    __slots__ = ("_jobs", "_thread", "_token")

    def __init__(self, name: str) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._jobs: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        # A daemon: a thread left blocked on its queue must not keep the process alive.
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            call = self._jobs.get()
            if call is None:
                return
            try:
                call.result = call.fn()
            except BaseException as exc:  # handed to the caller, whatever it is
                call.error = exc
            with contextlib.suppress(trio.RunFinishedError):  # the run ended meanwhile
                self._token.run_sync_soon(trio.lowlevel.reschedule, call.task)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` in the thread; return its result or raise its exception."""
        await trio.lowlevel.checkpoint_if_cancelled()
        call = _Call(fn, trio.lowlevel.current_task())
        self._jobs.put(call)
        await trio.lowlevel.wait_task_rescheduled(_refuse_abort)
        if call.error is not None:
            try:
                raise call.error
            finally:
                del call  # no cycle through the traceback's frame
        result: T = call.result
        return result

    def stop(self) -> None:
        """End the thread once the calls queued so far are done."""
        self._jobs.put(None)

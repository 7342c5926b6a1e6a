"""Worker threads that a cancellation (a deadline) can leave behind.

A thread cannot be killed. When a run passes its deadline while a sync tool is
still running in a worker thread, there are two choices: wait for the thread
(the deadline then means nothing: a ``time.sleep(5)`` under ``timeout=1``
returns after 5 s), or stop waiting and let the thread finish on its own. This
module does the second: :func:`run_sync_in_thread` returns (raises the
cancellation) at once, and the thread runs on, **stray**, its result thrown
away. Each stray thread is logged when it is left behind and again if it ever
finishes (with what it returned or raised), so a tool that ignores deadlines
shows up in the logs.

Stray threads are capped: while :data:`MAX_STRAY_THREADS` of them are still
running, a new call that cannot stop on its own is refused with
:class:`TooManyStrayThreads` instead of starting one more (on trio a stray
thread also keeps its token of the default thread limiter until it ends, so an
unbounded number would starve every other ``to_thread`` call). Work that can
stop on its own, such as a grep, takes a :class:`StopFlag` that is set when it
is left behind, and checks it as it goes.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, final

import anyio
import anyio.to_thread

from ..errors import TooManyStrayThreads
from .logs import get_logger

__all__ = [
    "MAX_STRAY_THREADS",
    "StopFlag",
    "StrayThreadStatistics",
    "TooManyStrayThreads",
    "run_sync_in_thread",
    "stray_thread_statistics",
    "wait_for_stray_threads",
]

T = TypeVar("T")

_log = get_logger("deepactors")

MAX_STRAY_THREADS = 16
"""Stray threads (left running at a cancellation) allowed at once in the process."""


class StopFlag:
    """Set when the caller of a thread is gone; the work checks it and gives up."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Ask the work to stop."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._event.is_set()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StrayThreadStatistics:
    """Worker threads left behind at a cancellation, process-wide.

    Attributes:
        running: Stray threads still running now.
        total: Threads left behind since the process started.
        finished_late: Stray threads that have ended since.
    """

    running: int
    total: int
    finished_late: int


_lock = threading.Lock()
_changed = threading.Condition(_lock)  # notified when a stray thread ends
_running = 0
_total = 0
_finished_late = 0


def stray_thread_statistics() -> StrayThreadStatistics:
    """A snapshot of the process's stray threads."""
    with _lock:
        return StrayThreadStatistics(running=_running, total=_total, finished_late=_finished_late)


def wait_for_stray_threads(timeout: float | None = None) -> bool:
    """Block until no stray thread is running, or ``timeout`` seconds pass.

    For a server's shutdown (give tools left running a chance to end before the
    process exits) and for tests. It blocks: call it from sync code or through
    ``anyio.to_thread.run_sync``.

    Returns:
        True when none is running.
    """
    with _changed:
        return _changed.wait_for(lambda: _running == 0, timeout)


@dataclass(slots=True, eq=False)
class _Call:
    """One thread's bookkeeping; its fields change under ``_lock`` only."""

    name: str
    started: float
    quiet: bool  # work that stops on its own: logged at debug level only
    running: bool = False
    finished: bool = False
    abandoned: bool = False


class _NotStarted(Exception):
    """The caller was gone before the thread took the call: it is not run at all."""


def _body(call: _Call, func: Callable[[], T]) -> T:
    with _lock:
        if call.abandoned:
            raise _NotStarted
        call.running = True
    outcome = "returned"
    try:
        return func()
    except BaseException as exc:
        outcome = f"raised {type(exc).__name__}"
        raise
    finally:
        global _running, _finished_late
        with _lock:
            call.finished = True
            late = call.abandoned
            if late:
                _running -= 1
                _finished_late += 1
                _changed.notify_all()
        if late:
            (_log.debug if call.quiet else _log.warning)(
                "stray thread finished; its result is discarded",
                name=call.name,
                outcome=outcome,
                seconds=round(time.monotonic() - call.started, 3),
            )


async def run_sync_in_thread(
    func: Callable[[], T], *, name: str, stop: StopFlag | None = None
) -> T:
    """Run ``func()`` in a worker thread that a cancellation leaves behind.

    Cancelled (a deadline, a cancelled run), this raises the cancellation at once
    instead of waiting for the thread, which runs on as a stray thread (see the
    module docstring); ``stop``, if given, is set then.

    Args:
        func: The blocking call.
        name: What the logs call it (a tool's name, ``"grep"``).
        stop: For work that checks a flag and stops early when left behind. Such
            work is not refused by the stray-thread cap.

    Raises:
        TooManyStrayThreads: ``stop`` is None and :data:`MAX_STRAY_THREADS`
            stray threads are still running.
    """
    global _running, _total
    if stop is None:
        with _lock:
            busy = _running
        if busy >= MAX_STRAY_THREADS:
            raise TooManyStrayThreads(
                f"{busy} earlier calls of blocking tools were left running at a deadline "
                f"and have not finished; no new thread is started until fewer than "
                f"{MAX_STRAY_THREADS} remain (a thread cannot be killed: the tool should "
                "return in time, or be async)"
            )
    call = _Call(name=name, started=time.monotonic(), quiet=stop is not None)
    try:
        return await anyio.to_thread.run_sync(
            functools.partial(_body, call, func), abandon_on_cancel=True
        )
    except anyio.get_cancelled_exc_class():
        with _lock:
            # Not taken by a thread yet: it never will be (asyncio drops it, and on
            # trio _body sees `abandoned` and raises at once, to nobody).
            left = call.running and not call.finished
            call.abandoned = True
            if left:
                _running += 1
                _total += 1
            running = _running
        if stop is not None:
            stop.set()
        if left:
            (_log.debug if call.quiet else _log.warning)(
                "left a worker thread running at a cancellation (a thread cannot be killed)",
                name=name,
                stray_threads=running,
            )
        raise

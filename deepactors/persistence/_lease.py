"""Thread leases: one run owns a conversation thread at a time.

A run takes its thread's lease before it reads the thread's records and gives it
back once its last record is stored, so runs of one thread never interleave
their records, whichever process, event loop or thread they run in.

This module holds what every checkpointer's lease shares: the record a holder
gets (:class:`ThreadLease`), fair first-come-first-served turns inside one
process (:class:`LocalTurns`), who a process is (:class:`Owner`) and whether
a process that took a lease on this machine is still alive (:func:`process_gone`).
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal, final

import anyio.lowlevel

from .._core.loops import Wakeup
from ..errors import ThreadBusy

__all__ = [
    "LocalTurns",
    "Owner",
    "ThreadLease",
    "WhenBusy",
    "process_gone",
    "this_owner",
]

WhenBusy = Literal["wait", "raise"]
"""What taking a busy thread's lease does: wait for it, or raise ``ThreadBusy``."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadLease:
    """A run's hold on a thread, from :meth:`Checkpointer.lease`.

    Attributes:
        thread_id: The thread.
        owner: A token unique to this holding (it fences the holder's writes).
        head: The ``seq`` of the thread's newest record when the lease was
            taken (0 for a thread with none): a run that kept the thread's
            state in memory and saw another head last time must reload it.
        waited: Seconds spent waiting for the lease.
        origin: When the thread's first record was stored (None: it has none,
            or the checkpointer does not say). With ``head`` it tells a thread
            from the one written anew after it was deleted (whose head may come
            back to the same number): a run that kept a thread's state in memory
            keeps using it only when both are what its last run left.
    """

    thread_id: str
    owner: str
    head: int
    waited: float
    origin: float | None = None


# --- turns inside one process ------------------------------------------------------


@dataclass(slots=True, kw_only=True, eq=False)
class _Waiter:
    """A queued taker. ``state`` changes under the lock only: ``waiting`` in the
    queue, ``granted`` the turn by a release (maybe not woken yet), ``done`` once
    the turn is in use or passed on. It, not the wake-up, says who owns the turn:
    a wake-up sent to another loop lands later."""

    wakeup: Wakeup
    state: Literal["waiting", "granted", "done"] = field(default="waiting")


class LocalTurns:
    """One holder per key at a time, the others served in arrival order.

    Works across tasks, event loops and threads of one process: a turn given to a
    waiter of another loop wakes it through that loop's thread-safe call. The
    state is guarded by a lock held for a few instructions only.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._queues: dict[str, deque[_Waiter]] = {}

    def holds(self, key: str) -> bool:
        """Whether someone holds ``key``'s turn now."""
        return key in self._held

    async def acquire(self, key: str, *, wait: bool) -> bool:
        """Take ``key``'s turn, waiting in line for it unless ``wait`` is false.

        Cancellation while waiting takes nothing.

        Returns:
            False when ``wait`` is false and the turn is taken.
        """
        await anyio.lowlevel.checkpoint()
        with self._lock:
            if key not in self._held:
                self._held.add(key)
                return True
            if not wait:
                return False
            waiter = _Waiter(wakeup=Wakeup())
            self._queues.setdefault(key, deque()).append(waiter)
        try:
            await waiter.wakeup.wait()
        except BaseException:
            with self._lock:
                handed_over = waiter.state == "granted"
                if waiter.state == "waiting":
                    queue = self._queues[key]
                    queue.remove(waiter)
                    if not queue:
                        del self._queues[key]
                waiter.state = "done"
            if handed_over:
                # A release handed us the turn just as we were cancelled: pass it on.
                self.release(key)
            raise
        with self._lock:
            waiter.state = "done"
        return True

    @asynccontextmanager
    async def hold(self, key: str, *, wait: bool) -> AsyncIterator[None]:
        """Hold thread ``key``'s turn for the block, given back on leaving.

        Args:
            key: The thread's id.
            wait: Wait in line for a held turn; when false, a held turn raises.

        Raises:
            ThreadBusy: ``wait`` is false and another run of this process holds
                the turn.
        """
        if not await self.acquire(key, wait=wait):
            raise ThreadBusy(
                f"thread {key!r} is being run by another run in this process",
                thread_id=key,
                holder="another run in this process",
            )
        try:
            yield
        finally:
            self.release(key)

    def release(self, key: str) -> None:
        """Give ``key``'s turn back: to the first waiter, if any (from any thread)."""
        while True:
            with self._lock:
                queue = self._queues.get(key)
                if not queue:
                    self._held.discard(key)
                    return
                # Handed over without ever becoming free: nobody can slip in.
                waiter = queue.popleft()
                if not queue:
                    del self._queues[key]
                waiter.state = "granted"
            if waiter.wakeup.set():
                return
            # Its event-loop run has ended, so it will never take the turn:
            # unless its cancellation passed it on already, pass it on here.
            with self._lock:
                if waiter.state != "granted":
                    return
                waiter.state = "done"


# --- who holds a lease, across processes -------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    """The process taking a lease, as recorded beside it.

    Attributes:
        pid: Its process id.
        host: Its host name, for people reading the error.
        machine: The kernel boot and pid namespace it runs in (Linux), or ""
            when unknown: a pid means the same process only within one machine.
        started: When the process started, in clock ticks since boot (Linux), to
            tell a pid reused by a new process from the one that took the lease.
    """

    pid: int
    host: str
    machine: str
    started: int | None


def this_owner() -> Owner:
    """This process. Reads ``/proc``: call it in a worker thread."""
    pid = os.getpid()
    return Owner(pid=pid, host=socket.gethostname(), machine=_machine(), started=_started(pid))


@functools.cache
def _machine() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{namespace}"


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or ")".
    return text[text.rindex(")") + 2 :].split()


def _started(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def process_gone(pid: int, started: int | None) -> bool:
    """Whether the process that recorded ``(pid, started)`` on this machine is gone.

    A zombie (killed, not yet reaped) is gone; so is a pid now used by another
    process. Blocking (reads ``/proc``): call it in a worker thread.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, under another user
    fields = _stat(pid)
    if fields is None:
        return started is not None  # no /proc to ask: trust the signal
    return fields[0] == "Z" or (started is not None and int(fields[19]) != started)

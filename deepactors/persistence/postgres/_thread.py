"""The trio driver: psycopg's sync ``ConnectionPool`` in worker threads (see ``_conn``).

Each operation runs whole in one anyio worker thread, as SQLite does on trio.

The wait for a pooled connection is the caller's to give up: a thread blocked
in the pool cannot see a trio cancellation, so that wait is abandoned on cancel
(:class:`_Checkout` gives back a connection that arrives too late) and bounded
by the caller's deadline as well, so a run with ``timeout=5`` stops at 5 s
while the database is down, not at the pool's 30 s. Once the operation has its
connection it runs whole: a caller cancelled then waits for it to end, as before.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import psycopg
from anyio.abc import TaskStatus
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from ._drive import (
    OPEN_TIMEOUT,
    LeaseConnection,
    check_idle,
    configure_lease,
    drive_sync,
    idle_connection_lost,
    pool_options,
    reaching,
    unlock_all,
)
from ._probe import Probe, probe_sync
from ._sql import Op

__all__ = ["ThreadDriver"]

T = TypeVar("T")

_POLL = 0.25
"""Seconds a listener thread waits for a notification before checking it should stop."""


def _wait_budget(wait: float = OPEN_TIMEOUT) -> float:
    """Seconds the calling task may wait for a pooled connection: ``wait``, or
    less when the task's deadline comes sooner."""
    left = anyio.current_effective_deadline() - anyio.current_time()
    return max(0.0, min(wait, left))


class _Abandoned(Exception):
    """The task that wanted a connection stopped waiting for it."""


class _Checkout:
    """A wait for a pooled connection, in a worker thread, that its task may abandon.

    The thread claims the connection it got, or, when the task has gone,
    gives it back; the task, cancelled, abandons the wait or (the thread has
    claimed it already) learns which connection is its own to give back.
    """

    def __init__(self, pool: ConnectionPool[psycopg.Connection[TupleRow]]) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._state: Literal["waiting", "claimed", "abandoned"] = "waiting"
        self.conn: psycopg.Connection[TupleRow] | None = None
        self.done = threading.Event()

    def take(self, timeout: float) -> psycopg.Connection[TupleRow] | None:
        """In the thread: a connection, or None when the task abandoned the wait."""
        conn: psycopg.Connection[TupleRow] = self._pool.getconn(timeout)
        with self._lock:
            if self._state == "waiting":
                self._state, self.conn = "claimed", conn
                return conn
        self._pool.putconn(conn)
        return None

    def abandon(self) -> psycopg.Connection[TupleRow] | None:
        """In the task, cancelled: None if the wait was abandoned, else the claimed connection."""
        # Held by the thread only to set a field: never waited on for long.
        with self._lock:
            if self._state == "waiting":
                self._state = "abandoned"
            return self.conn


class _ThreadLease:
    def __init__(self, conn: psycopg.Connection[TupleRow], limiter: anyio.CapacityLimiter) -> None:
        self.conn = conn
        self.dirty = False
        self._limiter = limiter

    async def run(self, op: Op[T], *, transaction: bool) -> T:
        finished = threading.Event()

        def target() -> T:
            try:
                return drive_sync(self.conn, op, transaction=transaction)
            finally:
                finished.set()

        # Abandoned on cancel (the thread is blocked in libpq): the query is then
        # cancelled in the server, and the thread waited for, before the caller
        # goes on (and closes the connection).
        try:
            return await anyio.to_thread.run_sync(
                target, abandon_on_cancel=True, limiter=self._limiter
            )
        except anyio.get_cancelled_exc_class():
            self.dirty = True
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_cancel_and_wait, self.conn, finished)
            raise
        except BaseException:
            self.dirty = True
            raise

    async def alive(self) -> bool:
        return not self.conn.broken and not self.conn.closed


def _cancel_and_wait(conn: psycopg.Connection[TupleRow], finished: threading.Event) -> None:
    if not finished.is_set():
        # Failing, the connection is closed next anyway.
        with suppress(psycopg.Error):
            conn.cancel_safe(timeout=5.0)
    finished.wait(10.0)


class ThreadDriver:
    def __init__(self, dsn: str, size: int, lease_size: int) -> None:
        self._dsn = dsn
        self._writer: psycopg.Connection[TupleRow] | None = None
        # Uncontended (group commit has one committer): no yield on taking it.
        self._write_lock = anyio.Lock(fast_acquire=True)
        work, leases = pool_options(dsn, size, lease_size)
        # Checked on checkout: see AsyncDriver.
        self._pool = ConnectionPool(**work, check=check_idle)
        self._leases = ConnectionPool(**leases, configure=configure_lease, check=check_idle)
        # Lease waits block a thread each: their own limiter, so they never
        # take the threads the run's other work needs.
        self._limiter = anyio.CapacityLimiter(lease_size)
        self.probe = Probe(functools.partial(probe_sync, dsn))

    async def open(self, prepare: Op[None]) -> None:
        def opened() -> None:
            # See AsyncDriver.open.
            with reaching():
                first = psycopg.Connection.connect(
                    self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
                )
            with first as conn:
                drive_sync(conn, prepare, transaction=True)
            self._pool.open()
            self._leases.open()

        await anyio.to_thread.run_sync(opened)

    async def run(self, op: Op[T], *, transaction: bool = True, wait: float = OPEN_TIMEOUT) -> T:
        checkout = _Checkout(self._pool)
        budget = _wait_budget(wait)

        def target() -> T:
            try:
                with reaching():
                    conn = checkout.take(budget)
                if conn is None:
                    raise _Abandoned  # to no one: the caller has gone
                try:
                    return drive_sync(conn, op, transaction=transaction)
                finally:
                    self._pool.putconn(conn)
            finally:
                checkout.done.set()

        try:
            return await anyio.to_thread.run_sync(target, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            if checkout.abandon() is not None:
                # The operation had begun: it runs whole, as it would have
                # without the cancellation, before the caller goes on.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(checkout.done.wait)
            raise

    def _write(self, op: Op[T], transaction: bool) -> T:
        if self._writer is None or idle_connection_lost(self._writer):
            if self._writer is not None:
                self._writer.close()
            self._writer = None
            with reaching():
                self._writer = psycopg.Connection.connect(
                    self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
                )
        return drive_sync(self._writer, op, transaction=transaction)

    async def write(self, op: Op[T], *, transaction: bool) -> T:
        async with self._write_lock:
            return await anyio.to_thread.run_sync(self._write, op, transaction)

    @asynccontextmanager
    async def lease_connection(self, wait: float) -> AsyncIterator[LeaseConnection]:
        checkout = _Checkout(self._leases)
        try:
            with reaching():
                conn = await anyio.to_thread.run_sync(
                    checkout.take, _wait_budget(wait), abandon_on_cancel=True
                )
        except anyio.get_cancelled_exc_class():
            late = checkout.abandon()
            if late is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._give_back, late, False)
            raise
        assert conn is not None  # None only once abandoned
        lease = _ThreadLease(conn, self._limiter)
        try:
            yield lease
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._give_back, conn, lease.dirty)

    def _give_back(self, conn: psycopg.Connection[TupleRow], dirty: bool) -> None:
        # Unlocked before the next holder is let in; see AsyncDriver.lease_connection.
        if not dirty:
            try:
                unlock_all(conn)
            except psycopg.Error:
                dirty = True
        if dirty:
            conn.close()
        self._leases.putconn(conn)

    async def listen(
        self, channel: str, on_payload: Callable[[str], None], task_status: TaskStatus[int]
    ) -> None:
        with reaching():
            conn = await anyio.to_thread.run_sync(
                functools.partial(
                    psycopg.Connection.connect,
                    self._dsn,
                    autocommit=True,
                    connect_timeout=int(OPEN_TIMEOUT),
                )
            )
        stop, exited = threading.Event(), threading.Event()
        try:
            await anyio.to_thread.run_sync(conn.execute, f"LISTEN {channel}")
            task_status.started(conn.info.backend_pid)
            await anyio.to_thread.run_sync(
                _listen_thread, conn, on_payload, stop, exited, abandon_on_cancel=True
            )
        finally:
            # Cancelled: the thread sees ``stop`` within _POLL and returns; only
            # then is its connection closed (psycopg connections are not shared).
            stop.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(exited.wait)
                await anyio.to_thread.run_sync(conn.close)

    async def aclose(self) -> None:
        def closed() -> None:
            if self._writer is not None:
                self._writer.close()
            self._leases.close()
            self._pool.close()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(closed)

    async def aclose_stale(self) -> None:
        # Sync connections and pools can be closed from any run.
        if self._writer is not None:
            await anyio.to_thread.run_sync(self._writer.close)
        await anyio.to_thread.run_sync(self._leases.close)
        await anyio.to_thread.run_sync(self._pool.close)


def _listen_thread(
    conn: psycopg.Connection[TupleRow],
    on_payload: Callable[[str], None],
    stop: threading.Event,
    exited: threading.Event,
) -> None:
    """Hand each notification on ``conn`` to the run that started the thread, until ``stop``."""
    try:
        while not stop.is_set():
            for notice in conn.notifies(timeout=_POLL):
                if stop.is_set():
                    return
                try:
                    anyio.from_thread.run_sync(on_payload, notice.payload)
                except anyio.RunFinishedError:
                    return
    finally:
        exited.set()

"""The trio driver: psycopg's sync ``ConnectionPool`` in worker threads (see ``_pg_conn``).

Each operation runs whole in one anyio worker thread, as SQLite does on trio.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import psycopg
from anyio.abc import TaskStatus
from psycopg_pool import ConnectionPool

from ._pg_drive import (
    OPEN_TIMEOUT,
    LeaseConnection,
    configure_lease,
    drive_sync,
    pool_options,
    unlock_all,
)
from ._pg_sql import Op

__all__ = ["ThreadDriver"]

T = TypeVar("T")

_POLL = 0.25
"""Seconds a listener thread waits for a notification before checking it should stop."""


class _ThreadLease:
    def __init__(self, conn: psycopg.Connection[Any], limiter: anyio.CapacityLimiter) -> None:
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


def _cancel_and_wait(conn: psycopg.Connection[Any], finished: threading.Event) -> None:
    if not finished.is_set():
        # Failing, the connection is closed next anyway.
        with suppress(psycopg.Error):
            conn.cancel_safe(timeout=5.0)
    finished.wait(10.0)


class ThreadDriver:
    def __init__(self, dsn: str, size: int, lease_size: int) -> None:
        self._dsn = dsn
        self._writer: psycopg.Connection[Any] | None = None
        # Uncontended (group commit has one committer): no yield on taking it.
        self._write_lock = anyio.Lock(fast_acquire=True)
        work, leases = pool_options(dsn, size, lease_size)
        self._pool = ConnectionPool(**work)
        self._leases = ConnectionPool(**leases, configure=configure_lease)
        # Lease waits block a thread each: their own limiter, so they never
        # take the threads the run's other work needs.
        self._limiter = anyio.CapacityLimiter(lease_size)

    async def open(self, prepare: Op[None]) -> None:
        def opened() -> None:
            # See AsyncDriver.open.
            with psycopg.Connection.connect(
                self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
            ) as conn:
                drive_sync(conn, prepare, transaction=True)
            self._pool.open()
            self._leases.open()

        await anyio.to_thread.run_sync(opened)

    def _run(self, op: Op[T], transaction: bool) -> T:
        with self._pool.connection() as conn:
            return drive_sync(conn, op, transaction=transaction)

    async def run(self, op: Op[T], *, transaction: bool = True) -> T:
        return await anyio.to_thread.run_sync(self._run, op, transaction)

    def _write(self, op: Op[T], transaction: bool) -> T:
        if self._writer is None or self._writer.broken or self._writer.closed:
            self._writer = psycopg.Connection.connect(
                self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
            )
        return drive_sync(self._writer, op, transaction=transaction)

    async def write(self, op: Op[T], *, transaction: bool) -> T:
        async with self._write_lock:
            return await anyio.to_thread.run_sync(self._write, op, transaction)

    @asynccontextmanager
    async def lease_connection(self) -> AsyncIterator[LeaseConnection]:
        conn = await anyio.to_thread.run_sync(self._leases.getconn)
        lease = _ThreadLease(conn, self._limiter)
        try:
            yield lease
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._give_back, conn, lease.dirty)

    def _give_back(self, conn: psycopg.Connection[Any], dirty: bool) -> None:
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
    conn: psycopg.Connection[Any],
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

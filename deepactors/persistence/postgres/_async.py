"""The asyncio driver: psycopg's ``AsyncConnectionPool``, no threads (see ``_conn``)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
import psycopg
from anyio.abc import TaskStatus
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from ._drive import (
    OPEN_TIMEOUT,
    LeaseConnection,
    check_idle_async,
    configure_lease_async,
    drive_async,
    idle_connection_lost,
    pool_options,
    reaching,
    unlock_all_async,
)
from ._probe import Probe, probe_async
from ._sql import Op

__all__ = ["AsyncDriver"]

T = TypeVar("T")


class _AsyncLease:
    def __init__(self, conn: psycopg.AsyncConnection[TupleRow]) -> None:
        self.conn = conn
        self.dirty = False

    async def run(self, op: Op[T], *, transaction: bool) -> T:
        # psycopg cancels the server's query when the waiting task is cancelled.
        try:
            return await drive_async(self.conn, op, transaction=transaction)
        except BaseException:
            self.dirty = True
            raise

    async def alive(self) -> bool:
        return not self.conn.broken and not self.conn.closed


class AsyncDriver:
    def __init__(self, dsn: str, size: int, lease_size: int) -> None:
        self._dsn = dsn
        self._writer: psycopg.AsyncConnection[TupleRow] | None = None
        # Uncontended (group commit has one committer): no yield on taking it.
        self._write_lock = anyio.Lock(fast_acquire=True)
        work, leases = pool_options(dsn, size, lease_size)
        # Checked on checkout: after a database restart the first operation
        # gets a live connection, not one the restart ended (see ``_drive``).
        self._pool = AsyncConnectionPool(**work, check=check_idle_async)
        self._leases = AsyncConnectionPool(
            **leases, configure=configure_lease_async, check=check_idle_async
        )
        self.probe = Probe(functools.partial(probe_async, dsn))

    async def open(self, prepare: Op[None]) -> None:
        # One connection of its own first: a wrong DSN or a server that is down
        # fails now, not after the pool's retries, and the schema is ready
        # before any pooled connection is used.
        with reaching():
            first = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
            )
        async with first as conn:
            await drive_async(conn, prepare, transaction=True)
        await self._pool.open()
        await self._leases.open()

    async def run(self, op: Op[T], *, transaction: bool = True, wait: float = OPEN_TIMEOUT) -> T:
        # The pool's ``connection()``, with the checkout apart: only its
        # failure says the database is unreachable.
        with reaching():
            conn = await self._pool.getconn(wait)
        try:
            async with conn:
                return await drive_async(conn, op, transaction=transaction)
        finally:
            await self._pool.putconn(conn)

    async def write(self, op: Op[T], *, transaction: bool) -> T:
        async with self._write_lock:
            if self._writer is None or idle_connection_lost(self._writer):
                if self._writer is not None:
                    await self._writer.close()
                self._writer = None
                with reaching():
                    self._writer = await psycopg.AsyncConnection.connect(
                        self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
                    )
            return await drive_async(self._writer, op, transaction=transaction)

    @asynccontextmanager
    async def lease_connection(self, wait: float) -> AsyncIterator[LeaseConnection]:
        with reaching():
            conn = await self._leases.getconn(wait)
        lease = _AsyncLease(conn)
        try:
            yield lease
        finally:
            with anyio.CancelScope(shield=True):
                # Unlocked here, before the next holder is let in: the pool's
                # own reset would run later, in a task of its own. A statement
                # that failed or was cancelled (its lock may have been granted
                # as the wait was cancelled), or a failed unlock, closes the
                # connection instead: dropped from the pool, lock and all.
                if not lease.dirty:
                    try:
                        await unlock_all_async(conn)
                    except psycopg.Error:
                        lease.dirty = True
                if lease.dirty:
                    await conn.close()
                await self._leases.putconn(conn)

    async def listen(
        self, channel: str, on_payload: Callable[[str], None], task_status: TaskStatus[int]
    ) -> None:
        with reaching():
            conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
            )
        async with conn:
            await conn.execute(f"LISTEN {channel}")
            task_status.started(conn.info.backend_pid)
            async for notice in conn.notifies():
                on_payload(notice.payload)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._writer is not None:
                await self._writer.close()
            await self._leases.close()
            await self._pool.close()

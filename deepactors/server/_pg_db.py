"""PostgreSQL for the server's shared run registry, on asyncio and on trio.

psycopg's async connections only run on asyncio, so :class:`PgDatabase` picks
the driver that fits the loop its owner opened it on:

- **asyncio**: an ``AsyncConnectionPool``, and ``LISTEN`` on an async connection.
- **trio**: a sync ``ConnectionPool`` used from anyio worker threads (one whole
  transaction per thread hop), and ``LISTEN`` on a sync connection in a worker
  thread of its own that hands each notification back to the loop.

Every operation is one transaction of a few statements (:data:`Op`), committed
before it returns; the notifications it sends (``pg_notify``) are delivered at
that commit, after the rows they point at are visible.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import anyio
import anyio.from_thread
import anyio.to_thread
import psycopg
import sniffio
from anyio.abc import TaskStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ..errors import ConfigurationError

__all__ = ["Op", "PgDatabase"]

Op: TypeAlias = tuple[str, Sequence[Any] | list[Sequence[Any]]]
"""One statement and its parameters; a list of parameter tuples runs it once per tuple."""

_POLL = 0.25
"""Seconds a trio listener thread waits for a notification before checking it should stop."""


def _many(params: Sequence[Any] | list[Sequence[Any]]) -> bool:
    return isinstance(params, list) and bool(params) and isinstance(params[0], (tuple, list))


class PgDatabase:
    """A small pool on one database, for the event loop that opens it.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        max_size: Connections in the pool (the listener has one more of its own).
    """

    def __init__(self, dsn: str, *, max_size: int = 8) -> None:
        self.dsn = dsn
        self._max_size = max_size
        self._async_pool: AsyncConnectionPool | None = None
        self._sync_pool: ConnectionPool | None = None

    async def open(self) -> None:
        """Open the pool on the current loop.

        Raises:
            ConfigurationError: The database cannot be reached.
        """
        try:
            if sniffio.current_async_library() == "asyncio":
                pool = AsyncConnectionPool(
                    self.dsn, min_size=1, max_size=self._max_size, open=False
                )
                await pool.open(wait=True, timeout=10)
                self._async_pool = pool
            else:
                sync = ConnectionPool(self.dsn, min_size=1, max_size=self._max_size, open=False)
                await anyio.to_thread.run_sync(functools.partial(sync.open, wait=True, timeout=10))
                self._sync_pool = sync
        except (psycopg.Error, TimeoutError) as exc:
            raise ConfigurationError(f"cannot connect to the runs database: {exc}") from exc

    async def aclose(self) -> None:
        """Close the pool."""
        if self._async_pool is not None:
            await self._async_pool.close()
        if self._sync_pool is not None:
            await anyio.to_thread.run_sync(self._sync_pool.close)

    async def run(self, ops: Sequence[Op]) -> list[tuple[Any, ...]]:
        """Run ``ops`` in one transaction; the rows of the last one that returns rows."""
        if self._async_pool is not None:
            async with self._async_pool.connection() as conn:
                rows: list[tuple[Any, ...]] = []
                async with conn.cursor() as cur:
                    for sql, params in ops:
                        if _many(params):
                            await cur.executemany(sql, params)
                        else:
                            await cur.execute(sql, params)
                            if cur.description is not None:
                                rows = await cur.fetchall()
                return rows
        assert self._sync_pool is not None, "open() first"
        return await anyio.to_thread.run_sync(self._run_sync, ops)

    def _run_sync(self, ops: Sequence[Op]) -> list[tuple[Any, ...]]:
        assert self._sync_pool is not None
        with self._sync_pool.connection() as conn, conn.cursor() as cur:
            rows: list[tuple[Any, ...]] = []
            for sql, params in ops:
                if _many(params):
                    cur.executemany(sql, params)
                else:
                    cur.execute(sql, params)
                    if cur.description is not None:
                        rows = cur.fetchall()
            return rows

    async def listen(
        self,
        channel: str,
        on_payload: Callable[[str], None],
        *,
        task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """``LISTEN`` on ``channel`` until cancelled, calling ``on_payload`` on the loop.

        Reports the listening connection's backend pid through ``task_status``
        once listening: the process is alive while that backend is (a process
        that dies closes its connection), which is how other processes tell.
        """
        if self._async_pool is not None:
            await self._listen_async(channel, on_payload, task_status)
        else:
            await self._listen_sync(channel, on_payload, task_status)

    async def _listen_async(
        self, channel: str, on_payload: Callable[[str], None], task_status: TaskStatus[int]
    ) -> None:
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        async with conn:
            await conn.execute(f"LISTEN {channel}")
            task_status.started(conn.info.backend_pid)
            async for notice in conn.notifies():
                on_payload(notice.payload)

    async def _listen_sync(
        self, channel: str, on_payload: Callable[[str], None], task_status: TaskStatus[int]
    ) -> None:
        conn = await anyio.to_thread.run_sync(
            functools.partial(psycopg.Connection.connect, self.dsn, autocommit=True)
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


def _listen_thread(
    conn: psycopg.Connection[Any],
    on_payload: Callable[[str], None],
    stop: threading.Event,
    exited: threading.Event,
) -> None:
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

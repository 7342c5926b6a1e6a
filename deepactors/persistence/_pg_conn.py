"""PostgreSQL connections on either event loop, for the checkpointer and the store.

A :class:`PgDatabase` opens, lazily on first use in an event-loop run, the
driver that fits that loop, and keeps one per live run (a
:class:`~deepactors._loops.PerLoop`, as the SQLite database does):

- **asyncio**: psycopg's ``AsyncConnectionPool``; no threads.
- **trio**: psycopg's sync ``ConnectionPool``, each operation run whole in an
  anyio worker thread (one hop per operation, as SQLite does on trio).

Both run the same operations (``_pg_sql``): a generator of statements run in
one transaction on one pooled connection. Connections are in autocommit mode,
so a transaction is exactly the operation's ``BEGIN ... COMMIT``, and an
operation that returns has committed.

Puts go through one more connection per run, the writer, kept open: group
commit has one committer at a time, and a kept connection saves a pool checkout
per put. Lease connections come from a second pool: a run holds one for its whole
duration (its session advisory lock lives on it), so leases can never starve
the writers of connections. Every connection given back to that pool runs
``pg_advisory_unlock_all()`` first, so no lock can outlive its lease, whatever
went wrong.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
    suppress,
)
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .._loops import PerLoop, UnsupportedLoop, current_run
from ..errors import PersistenceError
from ._pg_sql import Op, Result, Stmt

__all__ = ["LeaseConnection", "PgDatabase", "PgErrors", "describe_dsn"]

T = TypeVar("T")

OPEN_TIMEOUT = 30.0
"""Seconds to wait for a first connection, or for a free one from a pool."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PgErrors:
    """The exceptions one component raises: a failure, corruption."""

    failed: type[PersistenceError]
    corrupt: type[PersistenceError]


def describe_dsn(dsn: str) -> str:
    """The database a DSN names, for messages: ``postgresql://host:port/db`` (no password).

    Raises:
        ValueError: ``dsn`` is not a connection string psycopg can read.
    """
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"not a PostgreSQL connection string: {exc}") from None
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{host}{port}/{parts.get('dbname') or parts.get('user') or ''}"


def _first(op: Op[T]) -> tuple[Stmt | None, T | None]:
    try:
        return next(op), None
    except StopIteration as stop:
        return None, stop.value


def drive_sync(conn: psycopg.Connection[Any], op: Op[T], *, transaction: bool) -> T:
    """Run ``op`` on a sync connection (in a worker thread), in one transaction."""
    with conn.transaction() if transaction else nullcontext(), conn.cursor() as cur:
        stmt, value = _first(op)
        while stmt is not None:
            if stmt.many:
                cur.executemany(stmt.sql, stmt.params)
                result = Result([], cur.rowcount)
            else:
                cur.execute(stmt.sql, stmt.params)
                rows = cur.fetchall() if cur.description is not None else []
                result = Result(rows, cur.rowcount)
            try:
                stmt = op.send(result)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        return value  # type: ignore[return-value]


async def drive_async(conn: psycopg.AsyncConnection[Any], op: Op[T], *, transaction: bool) -> T:
    """Run ``op`` on an async connection, in one transaction: the same as :func:`drive_sync`."""
    async with conn.transaction() if transaction else nullcontext(), conn.cursor() as cur:
        stmt, value = _first(op)
        while stmt is not None:
            if stmt.many:
                await cur.executemany(stmt.sql, stmt.params)
                result = Result([], cur.rowcount)
            else:
                await cur.execute(stmt.sql, stmt.params)
                rows = await cur.fetchall() if cur.description is not None else []
                result = Result(rows, cur.rowcount)
            try:
                stmt = op.send(result)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        return value  # type: ignore[return-value]


class LeaseConnection(Protocol):
    """A connection held for one lease: its session advisory lock lives on it."""

    async def run(self, op: Op[T], *, transaction: bool) -> T:
        """Run ``op`` on this connection; cancellable even while the server waits."""
        ...

    async def alive(self) -> bool:
        """Whether the connection (and so its session's locks) still stands."""
        ...


class _Driver(Protocol):
    async def run(self, op: Op[T], *, transaction: bool = True) -> T: ...
    async def write(self, op: Op[T], *, transaction: bool) -> T: ...
    def lease_connection(self) -> AbstractAsyncContextManager[LeaseConnection]: ...
    async def aclose(self) -> None: ...


async def _unlock_all_async(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute("SELECT pg_advisory_unlock_all()")


def _unlock_all(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SELECT pg_advisory_unlock_all()")


# Settings of a lease connection's session. A backend waiting for a lock does
# not read its socket, so without a check it would not notice its client died
# (SIGKILL) until granted the lock; then it would hold it until its next send.
_LEASE_SESSION = "SET client_connection_check_interval = '1s'"


async def _configure_lease_async(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute(_LEASE_SESSION)


def _configure_lease(conn: psycopg.Connection[Any]) -> None:
    conn.execute(_LEASE_SESSION)


class _AsyncLease:
    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
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


def _lease_kwargs() -> dict[str, Any]:
    # The application name says who holds a lease, in pg_stat_activity and in
    # the ThreadBusy a refused run gets.
    name = f"deepactors pid {os.getpid()} on {socket.gethostname()}"
    return {"autocommit": True, "application_name": name[:63]}


class _AsyncDriver:
    def __init__(self, dsn: str, size: int, lease_size: int) -> None:
        self._dsn = dsn
        self._writer: psycopg.AsyncConnection[Any] | None = None
        self._write_lock = anyio.Lock()
        kwargs = {"autocommit": True}
        self._pool = AsyncConnectionPool(
            dsn, min_size=1, max_size=size, kwargs=kwargs, open=False, timeout=OPEN_TIMEOUT
        )
        self._leases = AsyncConnectionPool(
            dsn,
            min_size=0,
            max_size=lease_size,
            kwargs=_lease_kwargs(),
            open=False,
            timeout=OPEN_TIMEOUT,
            configure=_configure_lease_async,
            reset=_unlock_all_async,
        )

    async def open(self, prepare: Op[None]) -> None:
        # One connection of its own first: a wrong DSN or a server that is down
        # fails now, not after the pool's retries, and the schema is ready
        # before any pooled connection is used.
        async with await psycopg.AsyncConnection.connect(
            self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
        ) as conn:
            await drive_async(conn, prepare, transaction=True)
        await self._pool.open()
        await self._leases.open()

    async def run(self, op: Op[T], *, transaction: bool = True) -> T:
        async with self._pool.connection() as conn:
            return await drive_async(conn, op, transaction=transaction)

    async def write(self, op: Op[T], *, transaction: bool) -> T:
        async with self._write_lock:
            if self._writer is None or self._writer.broken or self._writer.closed:
                self._writer = await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=int(OPEN_TIMEOUT)
                )
            return await drive_async(self._writer, op, transaction=transaction)

    @asynccontextmanager
    async def lease_connection(self) -> AsyncIterator[LeaseConnection]:
        conn = await self._leases.getconn()
        lease = _AsyncLease(conn)
        try:
            yield lease
        finally:
            with anyio.CancelScope(shield=True):
                if lease.dirty:
                    # A statement failed or was cancelled (its lock may have been
                    # granted as the wait was cancelled): closed, the connection
                    # is dropped from the pool, lock and all.
                    await conn.close()
                await self._leases.putconn(conn)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._writer is not None:
                await self._writer.close()
            await self._leases.close()
            await self._pool.close()


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


class _ThreadDriver:
    def __init__(self, dsn: str, size: int, lease_size: int) -> None:
        self._dsn = dsn
        self._writer: psycopg.Connection[Any] | None = None
        self._write_lock = anyio.Lock()
        kwargs = {"autocommit": True}
        self._pool = ConnectionPool(
            dsn, min_size=1, max_size=size, kwargs=kwargs, open=False, timeout=OPEN_TIMEOUT
        )
        self._leases = ConnectionPool(
            dsn,
            min_size=0,
            max_size=lease_size,
            kwargs=_lease_kwargs(),
            open=False,
            timeout=OPEN_TIMEOUT,
            configure=_configure_lease,
            reset=_unlock_all,
        )
        # Lease waits block a thread each: their own limiter, so they never
        # take the threads the run's other work needs.
        self._limiter = anyio.CapacityLimiter(lease_size)

    async def open(self, prepare: Op[None]) -> None:
        def opened() -> None:
            # See _AsyncDriver.open.
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
                if lease.dirty:  # see _AsyncDriver.lease_connection
                    await anyio.to_thread.run_sync(conn.close)
                await anyio.to_thread.run_sync(self._leases.putconn, conn)

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


async def _close(driver: _Driver) -> None:
    await driver.aclose()


async def _close_stale(driver: _Driver) -> None:
    # An async pool belongs to its ended loop and cannot be closed from here;
    # its connections close when it is collected.
    if isinstance(driver, _ThreadDriver):
        await driver.aclose_stale()


class PgDatabase:
    """The lazily opened, loop-adaptive pools of one database (see the module docstring).

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        prepare: Makes, given :attr:`location`, the operation that creates or
            checks the component's tables.
        errors: The component's exceptions.
        pool_size: Connections for reads and writes, per event-loop run.
        lease_connections: Connections for held leases, per event-loop run.
    """

    def __init__(
        self,
        dsn: str,
        *,
        prepare: Callable[[str], Op[None]],
        errors: PgErrors,
        pool_size: int,
        lease_connections: int,
    ) -> None:
        self.dsn = dsn
        self.location = describe_dsn(dsn)
        self.errors = errors
        self._prepare = prepare
        self._sizes = (pool_size, lease_connections)
        self._drivers: PerLoop[_Driver] = PerLoop(self._open, _close, close_stale=_close_stale)

    async def _open(self) -> _Driver:
        library = current_run().library
        driver: _AsyncDriver | _ThreadDriver
        if library == "asyncio":
            driver = _AsyncDriver(self.dsn, *self._sizes)
        else:
            driver = _ThreadDriver(self.dsn, *self._sizes)
        try:
            await driver.open(self._prepare(self.location))
        except BaseException as exc:
            await driver.aclose()
            if isinstance(exc, psycopg.Error | TimeoutError):
                raise self.errors.failed(f"{self.location}: {exc}") from exc
            raise
        return driver

    async def driver(self) -> _Driver:
        """This run's driver, opened (and the schema checked) on first use.

        Raises:
            PersistenceError: Of the component's failure kind.
        """
        try:
            return await self._drivers.get()
        except UnsupportedLoop as exc:
            raise self.errors.failed(f"{self.location}: PostgreSQL persistence: {exc}") from None

    async def run(self, op: Op[T], *, transaction: bool = True) -> T:
        """Run ``op`` on a pooled connection of this run, in one transaction.

        Args:
            op: The operation.
            transaction: False for an operation of one statement, which is
                its own transaction in autocommit (two round trips fewer).

        Raises:
            PersistenceError: Of the component's kinds; psycopg's errors become
                its failure kind, naming the database.
        """
        driver = await self.driver()
        with self.translating():
            return await driver.run(op, transaction=transaction)

    async def write(self, op: Op[T], *, transaction: bool) -> T:
        """Run ``op`` on this run's writer connection (one writer at a time).

        Group commit has one committer at a time per run, so one connection
        kept for it saves a pool checkout per put.

        Raises:
            PersistenceError: As :meth:`run`.
        """
        driver = await self.driver()
        with self.translating():
            return await driver.write(op, transaction=transaction)

    @contextmanager
    def translating(self) -> Iterator[None]:
        """Turn psycopg's errors (and pool timeouts) into the component's failure."""
        try:
            yield
        except (psycopg.Error, TimeoutError) as exc:
            raise self.errors.failed(f"{self.location}: {exc}") from exc

    async def aclose(self) -> None:
        """Close this run's pools, if open; a later :meth:`run` reopens."""
        await self._drivers.aclose()

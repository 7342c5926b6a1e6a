"""Running ``_sql`` operations on psycopg connections, and what both drivers share.

:func:`drive_async` (asyncio) and :func:`drive_sync` (trio, in a worker thread)
run one operation, its statements in order, in one transaction when asked.
Connections are in autocommit mode, so a transaction is exactly the
operation's ``BEGIN ... COMMIT``, and an operation that returns has committed.

A database restart
------------------
A restart ends every session: each connection kept open (pooled, or the
writer) is then dead, though nothing says so until it is used. Pools check a
connection before handing it out (their ``check`` hook: :func:`check_idle`,
:func:`check_idle_async`) and replace a dead one, so the first operation after
the database is back runs on a live connection instead of failing. Pools
reconnect by themselves in the background, with psycopg's jittered exponential
backoff, given up after :data:`OPEN_TIMEOUT` (a later checkout starts again),
so no single wait between attempts grows past half of it. The writer, used for
every put, is checked without a round trip (:func:`idle_connection_lost`).

The check costs a round trip (psycopg's ``check_connection``, an empty query)
only when something arrived on the idle connection's socket, which is how a
server that ends a session says so: an idle pooled connection is otherwise
silent. Checking every checkout with a round trip would add about a query's
CPU to every operation (on asyncio, 250 -> 440 us for a store read).
"""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from typing import Any, Protocol, TypeVar

import psycopg
from anyio.abc import TaskStatus
from psycopg import pq
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from ._sql import Op, Result

__all__ = [
    "DOWN_WAIT",
    "OPEN_TIMEOUT",
    "PROBE_AFTER",
    "CheckoutTimeout",
    "Driver",
    "LeaseConnection",
    "Unreachable",
    "check_idle",
    "check_idle_async",
    "configure_lease",
    "configure_lease_async",
    "drive_async",
    "drive_sync",
    "idle_connection_lost",
    "pool_options",
    "reaching",
    "unlock_all",
    "unlock_all_async",
]

T = TypeVar("T")

OPEN_TIMEOUT = 30.0
"""Seconds to wait for a first connection, or for a free one from a pool; and
how long a pool keeps trying to reconnect in the background before it gives up
(until the next checkout)."""

DOWN_WAIT = 1.0
"""Seconds to wait for a pooled connection while the database is known to be down.

The pool goes on reconnecting in the background; a request waits this long
for it, not :data:`OPEN_TIMEOUT`, so that an outage is answered at once (503)
and the first request after the database is back still gets through."""

PROBE_AFTER = 2.0
"""Seconds to wait for a pooled connection before asking the server whether it is up.

A pool says nothing of its failing connects until its own timeout
(:data:`OPEN_TIMEOUT`), and an empty pool looks the same whether the database
is down or every connection is in use. After this long, a connection of its
own (``_probe``) tells the two apart: refused, the database is down and
the request is answered now; made, the pool is only busy and the request
waits out the rest of :data:`OPEN_TIMEOUT` as before."""


class Unreachable(Exception):
    """No connection to the database could be had; the psycopg error is the cause."""


class CheckoutTimeout(Unreachable):
    """No pooled connection came within the wait: the database is down, or the pool busy.

    Raised before the operation that wanted the connection has begun, so it
    may be tried again as it is.
    """


@contextmanager
def reaching() -> Iterator[None]:
    """Around getting a connection: failing to get one raises :class:`Unreachable`.

    Only there: a statement that fails on a connection it has may have been
    committed or not, which is not an outage to retry blindly.
    """
    try:
        yield
    except PoolClosed:
        raise  # shutting down: not the database's doing
    except PoolTimeout as exc:
        raise CheckoutTimeout(str(exc)) from exc
    except psycopg.OperationalError as exc:
        raise Unreachable(str(exc)) from exc


def _spoke_while_idle(
    conn: psycopg.Connection[TupleRow] | psycopg.AsyncConnection[TupleRow],
) -> bool:
    """Whether anything arrived on an idle connection's socket (or it has none)."""
    if conn.closed or conn.broken:
        return True
    try:
        # A poll that returns at once: nothing here waits.
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return bool(readable)


def check_idle(conn: psycopg.Connection[TupleRow]) -> None:
    """A sync pool's ``check``: raises if the connection the pool would hand out is dead.

    Raises:
        psycopg.OperationalError: It is (the pool then discards it and takes another).
    """
    if _spoke_while_idle(conn):
        ConnectionPool.check_connection(conn)


async def check_idle_async(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """An async pool's ``check``: as :func:`check_idle`."""
    if _spoke_while_idle(conn):
        await AsyncConnectionPool.check_connection(conn)


def idle_connection_lost(
    conn: psycopg.Connection[TupleRow] | psycopg.AsyncConnection[TupleRow],
) -> bool:
    """Whether an idle connection was closed by the server (a restart, a terminated backend).

    Reads what arrived on the socket while the connection sat idle, without
    waiting (libpq's socket is non-blocking): a server that ends a session
    sends an error and closes it, which libpq then reports as a bad connection.
    A connection that went silent (a network cut) is not detected here; its
    next statement fails instead.
    """
    if conn.closed or conn.broken:
        return True
    try:
        # Twice: one read takes in the server's farewell message, the next
        # sees the end of the stream (each returns at once when nothing came).
        conn.pgconn.consume_input()
        conn.pgconn.consume_input()
    except psycopg.OperationalError:
        return True
    return conn.pgconn.status != pq.ConnStatus.OK


def drive_sync(conn: psycopg.Connection[TupleRow], op: Op[T], *, transaction: bool) -> T:
    """Run ``op`` on a sync connection (in a worker thread), in one transaction."""
    with conn.transaction() if transaction else nullcontext(), conn.cursor() as cur:
        try:
            stmt = next(op)
            while True:
                if stmt.many:
                    cur.executemany(stmt.sql, stmt.params)
                    result = Result([], cur.rowcount)
                else:
                    cur.execute(stmt.sql, stmt.params)
                    rows = cur.fetchall() if cur.description is not None else []
                    result = Result(rows, cur.rowcount)
                stmt = op.send(result)
        except StopIteration as stop:  # the operation's value
            done: T = stop.value
            return done


async def drive_async(
    conn: psycopg.AsyncConnection[TupleRow], op: Op[T], *, transaction: bool
) -> T:
    """Run ``op`` on an async connection, in one transaction: the same as :func:`drive_sync`."""
    async with conn.transaction() if transaction else nullcontext(), conn.cursor() as cur:
        try:
            stmt = next(op)
            while True:
                if stmt.many:
                    await cur.executemany(stmt.sql, stmt.params)
                    result = Result([], cur.rowcount)
                else:
                    await cur.execute(stmt.sql, stmt.params)
                    rows = await cur.fetchall() if cur.description is not None else []
                    result = Result(rows, cur.rowcount)
                stmt = op.send(result)
        except StopIteration as stop:  # the operation's value
            done: T = stop.value
            return done


class LeaseConnection(Protocol):
    """A connection held for one lease: its session advisory lock lives on it."""

    async def run(self, op: Op[T], *, transaction: bool) -> T:
        """Run ``op`` on this connection; cancellable even while the server waits."""
        ...

    async def alive(self) -> bool:
        """Whether the connection (and so its session's locks) still stands."""
        ...


class Driver(Protocol):
    """What a PgDatabase needs of the driver of one event-loop run.

    :meth:`run` and :meth:`lease_connection` wait at most ``wait`` seconds for
    a pooled connection, then raise :class:`CheckoutTimeout` (``op`` not
    begun); :meth:`probe` raises :class:`Unreachable` when the server takes
    no new connection.
    """

    async def run(self, op: Op[T], *, transaction: bool = True, wait: float = ...) -> T: ...
    async def write(self, op: Op[T], *, transaction: bool) -> T: ...
    def lease_connection(self, wait: float) -> AbstractAsyncContextManager[LeaseConnection]: ...
    async def probe(self) -> None: ...
    async def listen(
        self, channel: str, on_payload: Callable[[str], None], task_status: TaskStatus[int]
    ) -> None: ...
    async def aclose(self) -> None: ...


async def unlock_all_async(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """Release every advisory lock of the session, before the connection goes back."""
    await conn.execute("SELECT pg_advisory_unlock_all()")


def unlock_all(conn: psycopg.Connection[TupleRow]) -> None:
    """Release every advisory lock of the session, before the connection goes back."""
    conn.execute("SELECT pg_advisory_unlock_all()")


# Settings of a lease connection's session. A backend waiting for a lock does
# not read its socket, so without a check it would not notice its client died
# (SIGKILL) until granted the lock; then it would hold it until its next send.
_LEASE_SESSION = "SET client_connection_check_interval = '1s'"


_CHECK_SINCE = 140000  # the setting came with PostgreSQL 14


async def configure_lease_async(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """Set up a new lease connection's session (see ``_LEASE_SESSION``)."""
    if conn.info.server_version >= _CHECK_SINCE:
        await conn.execute(_LEASE_SESSION)


def configure_lease(conn: psycopg.Connection[TupleRow]) -> None:
    """Set up a new lease connection's session (see ``_LEASE_SESSION``)."""
    if conn.info.server_version >= _CHECK_SINCE:
        conn.execute(_LEASE_SESSION)


def pool_options(dsn: str, size: int, lease_size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Options of the two pools, the same for psycopg's async and sync pool classes.

    The work pool keeps one connection open; the lease pool opens one per held
    lease. A lease connection's application name says who holds a lease, in
    ``pg_stat_activity`` and in the ``ThreadBusy`` a refused run gets. The lease
    pool's ``configure`` and both pools' ``check`` (:func:`check_idle` or
    :func:`check_idle_async`) are the caller's to add.
    """
    name = f"deepactors pid {os.getpid()} on {socket.gethostname()}"
    work = {
        "conninfo": dsn,
        "min_size": 1,
        "max_size": size,
        "kwargs": {"autocommit": True},
        "open": False,
        "timeout": OPEN_TIMEOUT,
        "reconnect_timeout": OPEN_TIMEOUT,
    }
    leases = {
        "conninfo": dsn,
        "min_size": 0,
        "max_size": lease_size,
        "kwargs": {"autocommit": True, "application_name": name[:63]},
        "open": False,
        "timeout": OPEN_TIMEOUT,
        "reconnect_timeout": OPEN_TIMEOUT,
    }
    return work, leases

"""Thread leases in PostgreSQL: a session advisory lock per thread being run.

Why an advisory lock and not a lease row (as in SQLite)
-------------------------------------------------------
A session advisory lock (``pg_advisory_lock``) lives exactly as long as the
connection that took it. When the holding process dies (SIGKILL, a crash, a
lost machine), the server ends its session and the lock goes with it at once:
no expiry to wait out, no renewals to keep up, no clock compared across
machines, no pid that only means something on one host. Waiting is the
server's own lock queue, first come first served across every process, and a
waiter costs no polling. The price is one connection held per running thread
(from a pool of its own, see ``_conn``), which a server doing work on a
thread pays anyway.

A lock alone cannot stop a holder that lost it from writing (its process
stalled while its connection dropped, and another took the thread), so writes
are also fenced (``_records``): each holding gets a token, stored on the
thread's row once the lock is taken, and a fenced put stores nothing unless the
token is still the thread's and the lock is still held.

Inside one process, runs of a thread queue on :class:`LocalTurns` first, so
only the first of them holds a connection to wait in the server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio

from ...errors import ThreadBusy
from .._lease import LocalTurns, ThreadLease, WhenBusy
from ._conn import LeaseConnection, PgDatabase
from ._records import claim_thread
from ._sql import Op, Stmt, lock_key

__all__ = ["Held", "PgLeases"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Held:
    """A lease held through this process: its fence and its connection."""

    owner: str
    lock_key: int
    connection: LeaseConnection


def _lock(key: int) -> Op[None]:
    yield Stmt("SELECT pg_advisory_lock(%s)", (key,))


def _try_lock(key: int) -> Op[bool]:
    result = yield Stmt("SELECT pg_try_advisory_lock(%s)", (key,))
    return bool(result.rows[0][0])


def _holder(key: int) -> Op[str]:
    """Who holds the lock on ``key``, for a ThreadBusy message."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    result = yield Stmt(
        "SELECT l.pid, a.application_name, a.client_addr::text FROM pg_locks AS l"
        " LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid",
        (unsigned >> 32, unsigned & 0xFFFF_FFFF),
    )
    if not result.rows:
        return "another process (which has just let go)"
    pid, name, addr = result.rows[0]
    who = name or f"the session of server pid {pid}"
    return who + (f" (from {addr})" if addr else "")


class PgLeases:
    """The leases one checkpointer object takes in its database.

    Args:
        db: The checkpointer's database.
        when_busy: Wait for a held thread, or raise ``ThreadBusy``.
    """

    def __init__(self, db: PgDatabase, *, when_busy: WhenBusy) -> None:
        self._db = db
        self._wait = when_busy == "wait"
        self._turns = LocalTurns()
        self._held: dict[str, Held] = {}

    def held(self, thread_id: str) -> Held | None:
        """The lease held on ``thread_id`` through this object, if any."""
        return self._held.get(thread_id)

    @asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[ThreadLease]:
        """Take the thread's lease, hold it for the block, give it back."""
        started = anyio.current_time()
        async with self._turns.hold(thread_id, wait=self._wait), AsyncExitStack() as stack:
            key = lock_key("thread", thread_id)
            # Given back on leaving, unlocked first (or closed).
            conn = await stack.enter_async_context(self._db.lease_connection())
            lease = await self._take(conn, thread_id, key, started)
            self._held[thread_id] = Held(owner=lease.owner, lock_key=key, connection=conn)
            try:
                yield lease
            finally:
                del self._held[thread_id]

    async def _take(
        self, conn: LeaseConnection, thread_id: str, key: int, started: float
    ) -> ThreadLease:
        with self._db.translating():
            if self._wait:
                await conn.run(_lock(key), transaction=False)
            elif not await conn.run(_try_lock(key), transaction=False):
                holder = await conn.run(_holder(key), transaction=False)
                raise ThreadBusy(
                    f"{self._db.location}: thread {thread_id!r} is being run by {holder}",
                    thread_id=thread_id,
                    holder=holder,
                )
            owner = uuid.uuid4().hex
            head, origin = await conn.run(claim_thread(thread_id, owner), transaction=False)
        return ThreadLease(
            thread_id=thread_id,
            owner=owner,
            head=head,
            waited=anyio.current_time() - started,
            origin=origin,
        )

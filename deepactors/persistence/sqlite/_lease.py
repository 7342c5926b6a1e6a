"""The thread lease in SQL: one row per thread being run, in the checkpoint file.

A row says who holds the thread (a token per holding, with the holder's pid,
host and machine for people and for liveness checks) and until when. Taking it
is a write transaction (``BEGIN IMMEDIATE``), so two processes can never both
see it free; the holder renews ``expires_at`` while its run is alive. A lease is
free when it has no owner, when it has expired, or when its owner was a process
on this machine that is gone (killed, crashed): a crashed server's restart does
not wait for the expiry.

Waiting is by polling, so it is made fair by a queue of one: the first waiter
claims the next turn (``next_owner``, renewed while it polls, lapsing if it
stops), and nobody else may take the lease before it. A holder that releases
and at once asks again therefore lets a waiting process in first.

:class:`SqliteLeases` holds them for a checkpointer; every other function
here is one operation run in the connection's thread.
"""

from __future__ import annotations

import contextlib
import functools
import random
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NamedTuple

import anyio

from ..._core.logs import get_logger
from ..._core.loops import spawn_system_task
from ...errors import PersistenceError, ThreadBusy
from .._lease import LocalTurns, Owner, ThreadLease, WhenBusy, process_gone, this_owner
from ._conn import Database

__all__ = ["LEASE_DDL", "SqliteLeases", "holds_lease"]

_log = get_logger("deepactors")

_FIRST_POLL = 0.005
_MAX_POLL = 0.25

LEASE_DDL = (
    """CREATE TABLE thread_leases (
        thread_id  TEXT PRIMARY KEY,
        owner      TEXT,
        pid        INTEGER,
        host       TEXT,
        machine    TEXT,
        started    INTEGER,
        taken_at   REAL,
        expires_at REAL,
        next_owner TEXT,
        next_until REAL
    )""",
)

CLAIM_TTL = 2.0
"""How long a waiter's claim on the next turn lasts unless renewed by its polls
(which come at least every few hundred milliseconds)."""


@dataclass(frozen=True, slots=True)
class Taken:
    """The lease is ours; ``head`` is the thread's newest ``seq`` (0: none), ``origin``
    when its first record was stored (None: none)."""

    head: int
    origin: float | None


@dataclass(frozen=True, slots=True)
class Held:
    """The lease is someone else's: ``holder`` says whose, for an error message."""

    holder: str


class _Row(NamedTuple):
    owner: str | None
    pid: int | None
    host: str | None
    machine: str | None
    started: int | None
    taken_at: float | None
    expires_at: float | None
    next_owner: str | None
    next_until: float | None


_SELECT = (
    "SELECT owner, pid, host, machine, started, taken_at, expires_at, next_owner, next_until"
    " FROM thread_leases WHERE thread_id = ?"
)

_TAKE = (
    "INSERT INTO thread_leases (thread_id, owner, pid, host, machine, started, taken_at,"
    " expires_at, next_owner, next_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)"
    " ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, pid = excluded.pid,"
    " host = excluded.host, machine = excluded.machine, started = excluded.started,"
    " taken_at = excluded.taken_at, expires_at = excluded.expires_at,"
    " next_owner = NULL, next_until = NULL"
)


def _row(raw: sqlite3.Connection, thread_id: str) -> _Row | None:
    found = raw.execute(_SELECT, (thread_id,)).fetchone()
    return None if found is None else _Row(*found)


def _held_by_another(row: _Row | None, me: Owner, now: float) -> bool:
    if row is None or row.owner is None or row.expires_at is None or row.expires_at <= now:
        return False
    # A pid only means something on the machine (and in the pid namespace) it
    # came from; elsewhere only the expiry can tell.
    return not (
        row.machine
        and row.machine == me.machine
        and row.pid is not None
        and process_gone(row.pid, row.started)
    )


def _claimed_by_another(row: _Row | None, token: str, now: float) -> bool:
    return (
        row is not None
        and row.next_owner is not None
        and row.next_owner != token
        and (row.next_until or 0.0) > now
    )


def _describe(row: _Row | None, now: float) -> str:
    if row is None or row.owner is None:
        return "another process, whose turn comes first"
    left = (row.expires_at or now) - now
    return f"pid {row.pid} on {row.host} (its lease runs {left:.0f} s more unless renewed)"


def take_lease(
    raw: sqlite3.Connection, *, thread_id: str, token: str, ttl: float, now: float, queue: bool
) -> Taken | Held:
    """Take the thread's lease for ``token`` if it is free and nobody is before us.

    Args:
        queue: When busy, claim the next turn (a waiter that will poll again).
    """
    me = this_owner()
    row = _row(raw, thread_id)
    busy = _held_by_another(row, me, now) or _claimed_by_another(row, token, now)
    if busy and not (queue and _claim_due(row, token, now)):
        return Held(_describe(row, now))  # nothing to write: no write lock taken
    raw.execute("BEGIN IMMEDIATE")
    try:
        # Again, under the write lock: another process may have moved meanwhile.
        row = _row(raw, thread_id)
        if _held_by_another(row, me, now) or _claimed_by_another(row, token, now):
            if queue and _claim_due(row, token, now):
                raw.execute(
                    "UPDATE thread_leases SET next_owner = ?, next_until = ? WHERE thread_id = ?",
                    (token, now + CLAIM_TTL, thread_id),
                )
            outcome: Taken | Held = Held(_describe(row, now))
        else:
            raw.execute(
                _TAKE, (thread_id, token, me.pid, me.host, me.machine, me.started, now, now + ttl)
            )
            head, origin = raw.execute(
                "SELECT coalesce(max(seq), 0), (SELECT created_at FROM checkpoint_records"
                " WHERE thread_id = ? AND seq = 1) FROM checkpoint_records WHERE thread_id = ?",
                (thread_id, thread_id),
            ).fetchone()
            outcome = Taken(
                head if isinstance(head, int) else 0,
                float(origin) if isinstance(origin, int | float) else None,
            )
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    return outcome


def _claim_due(row: _Row | None, token: str, now: float) -> bool:
    """Whether our claim on the next turn must be made or renewed now."""
    if row is None or _claimed_by_another(row, token, now):
        return False
    return row.next_owner != token or (row.next_until or 0.0) - now < CLAIM_TTL / 2


def renew_lease(
    raw: sqlite3.Connection, *, thread_id: str, token: str, ttl: float, now: float
) -> bool:
    """Push the lease's expiry on; False when it is no longer ours."""
    cursor = raw.execute(
        "UPDATE thread_leases SET expires_at = ? WHERE thread_id = ? AND owner = ?",
        (now + ttl, thread_id, token),
    )
    return cursor.rowcount == 1


def release_lease(raw: sqlite3.Connection, *, thread_id: str, token: str, now: float) -> None:
    """Give the lease back (nothing happens when it is no longer ours)."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        # The row goes, unless a waiter's claim on the next turn must stay.
        gone = raw.execute(
            "DELETE FROM thread_leases WHERE thread_id = ? AND owner = ?"
            " AND (next_owner IS NULL OR next_until <= ?)",
            (thread_id, token, now),
        ).rowcount
        if not gone:
            raw.execute(
                "UPDATE thread_leases SET owner = NULL, pid = NULL, host = NULL, machine = NULL,"
                " started = NULL, taken_at = NULL, expires_at = NULL"
                " WHERE thread_id = ? AND owner = ?",
                (thread_id, token),
            )
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def withdraw_claim(raw: sqlite3.Connection, *, thread_id: str, token: str) -> None:
    """Drop a waiter's claim on the next turn (it stopped waiting)."""
    raw.execute(
        "UPDATE thread_leases SET next_owner = NULL, next_until = NULL"
        " WHERE thread_id = ? AND next_owner = ?",
        (thread_id, token),
    )


def holds_lease(raw: sqlite3.Connection, thread_id: str, token: str) -> bool:
    """Whether ``token`` holds the thread's lease (inside the caller's transaction)."""
    found = raw.execute(
        "SELECT 1 FROM thread_leases WHERE thread_id = ? AND owner = ?", (thread_id, token)
    ).fetchone()
    return found is not None


class SqliteLeases:
    """The leases one checkpointer object takes in its file.

    Args:
        db: The checkpointer's database.
        when_busy: Wait for a held thread, or raise ``ThreadBusy``.
        ttl: Seconds a lease lasts without renewal.
        clock: Wall-clock time (the expiries are compared across processes).
    """

    def __init__(
        self, db: Database, *, when_busy: WhenBusy, ttl: float, clock: Callable[[], float]
    ) -> None:
        self._db = db
        self._wait = when_busy == "wait"
        self._ttl = ttl
        self._clock = clock
        self._turns = LocalTurns()
        # The owner token of each lease held through this object now.
        self._held: dict[str, str] = {}

    def owner_of(self, thread_id: str) -> str | None:
        """The token of the lease held on ``thread_id`` through this object, if any."""
        return self._held.get(thread_id)

    @asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[ThreadLease]:
        """Take the thread's lease, keep it renewed, give it back on leaving."""
        started = anyio.current_time()
        async with self._turns.hold(thread_id, wait=self._wait):
            lease = await self._take(thread_id, started=started)
            self._held[thread_id] = lease.owner
            stop, stopped = anyio.Event(), anyio.Event()
            spawn_system_task(functools.partial(self._keep, lease, stop, stopped))
            try:
                yield lease
            finally:
                del self._held[thread_id]
                stop.set()
                with anyio.CancelScope(shield=True):
                    await stopped.wait()
                    await self._release(lease)

    async def _take(self, thread_id: str, *, started: float) -> ThreadLease:
        token = uuid.uuid4().hex
        delay = _FIRST_POLL
        try:
            while True:
                outcome = await self._db.run(
                    functools.partial(
                        take_lease,
                        thread_id=thread_id,
                        token=token,
                        ttl=self._ttl,
                        now=self._clock(),
                        queue=self._wait,
                    )
                )
                if isinstance(outcome, Taken):
                    return ThreadLease(
                        thread_id=thread_id,
                        owner=token,
                        head=outcome.head,
                        origin=outcome.origin,
                        waited=anyio.current_time() - started,
                    )
                if not self._wait:
                    raise ThreadBusy(
                        f"{self._db.file}: thread {thread_id!r} is being run by {outcome.holder}",
                        thread_id=thread_id,
                        holder=outcome.holder,
                    )
                # Jittered, so that waiters started together do not poll in step.
                await anyio.sleep(delay * random.uniform(0.75, 1.0))
                delay = min(delay * 1.5, _MAX_POLL)
        except BaseException:
            if self._wait:
                # Cancelled while waiting (a deadline): let the next waiter in
                # now rather than when our claim on the next turn lapses.
                # (If that fails, the claim lapses by itself within seconds.)
                with anyio.CancelScope(shield=True), contextlib.suppress(PersistenceError):
                    await self._db.run(
                        functools.partial(withdraw_claim, thread_id=thread_id, token=token)
                    )
            raise

    async def _keep(self, lease: ThreadLease, stop: anyio.Event, stopped: anyio.Event) -> None:
        """Renew the lease until told to stop (a system task of the holder's run)."""
        try:
            while True:
                with anyio.move_on_after(self._ttl / 3):
                    await stop.wait()
                if stop.is_set():
                    return
                try:
                    still = await self._db.run(
                        functools.partial(
                            renew_lease,
                            thread_id=lease.thread_id,
                            token=lease.owner,
                            ttl=self._ttl,
                            now=self._clock(),
                        )
                    )
                except Exception as exc:
                    # Passing, most likely (the file is busy): the lease lasts
                    # several periods. Nothing may escape: on trio an error in a
                    # system task would crash the run.
                    _log.warning("thread lease not renewed", file=self._db.file, error=str(exc))
                    continue
                if not still:
                    return  # taken over: the holder's next put is refused
        finally:
            stopped.set()

    async def _release(self, lease: ThreadLease) -> None:
        try:
            await self._db.run(
                functools.partial(
                    release_lease,
                    thread_id=lease.thread_id,
                    token=lease.owner,
                    now=self._clock(),
                )
            )
        except PersistenceError as exc:
            # The run's outcome stands; the lease lapses by itself after its ttl.
            _log.warning(
                "thread lease not released; it lapses by itself",
                file=self._db.file,
                thread_id=lease.thread_id,
                error=str(exc),
            )

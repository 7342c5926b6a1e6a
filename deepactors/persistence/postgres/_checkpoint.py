"""``PostgresCheckpointer``: checkpoint records and thread leases in PostgreSQL.

The same protocol and behaviour as :class:`SqliteCheckpointer`, for several
processes on one or many machines sharing threads: records are diffs (one row
each, compact JSON text), numbered per thread with no gaps; a ``put`` returns
once its transaction has committed; reads check what they read; leases (see
``_lease``) make runs of one thread take turns across processes.

Group commit: puts made while another put of the same event-loop run is
committing wait for it, then go together in one transaction (one statement
per put), so runs writing at once share commits as the actors of one run do.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import AsyncResource

from ..._core.perloop import PerLoop
from ...errors import (
    CheckpointCorrupt,
    CheckpointError,
    CheckpointUnavailable,
    ConfigurationError,
    ThreadLeaseLost,
)
from .._checkpoint import (
    CheckpointRecord,
    CheckpointWrite,
    EncodedWrite,
    ThreadInfo,
    check_rows,
    check_thread_id,
    encode_writes,
)
from .._json import check_text
from .._lease import ThreadLease, WhenBusy
from ._conn import PgDatabase, PgErrors, PoolWaits
from ._drive import DOWN_WAIT, OPEN_TIMEOUT, PROBE_AFTER
from ._lease import PgLeases
from ._records import (
    MIGRATION,
    Batch,
    decode_records,
    delete_thread,
    list_threads,
    put_batches,
    read_rows,
    replace_thread,
)
from ._sql import check_no_nul, prepare_schema

__all__ = ["PostgresCheckpointer"]

# Reads holding more JSON than this are decoded in a worker thread, not on the loop.
_DECODE_INLINE = 64 * 1024


@dataclass(slots=True, eq=False)
class _Pending:
    batch: Batch
    wake: anyio.Event = field(default_factory=anyio.Event)
    done: bool = False
    error: BaseException | None = None


class _GroupCommit:
    """The puts of one event-loop run: one leader commits whatever is pending."""

    def __init__(self, db: PgDatabase) -> None:
        self._db = db
        self._pending: list[_Pending] = []
        self._leading = False

    async def put(self, batch: Batch) -> None:
        me = _Pending(batch)
        self._pending.append(me)
        # Shielded: a put that is cancelled still lands, whole, before the
        # caller sees the cancellation (as SQLite's transaction finishes in its
        # thread); a batch is never left half-known.
        with anyio.CancelScope(shield=True):
            if self._leading:
                await me.wake.wait()
            if not me.done:  # woken to lead, or nobody was leading
                self._leading = True
                try:
                    group, self._pending = self._pending, []
                    await self._commit(group)
                finally:
                    if self._pending:
                        self._pending[0].wake.set()  # the next group's leader
                    else:
                        self._leading = False
        # A cancel point, not another trip round the loop: the commit waited on
        # the server already.
        await anyio.lowlevel.checkpoint_if_cancelled()
        if me.error is not None:
            raise me.error

    async def _commit(self, group: list[_Pending]) -> None:
        try:
            stored = await self._db.write(
                put_batches([p.batch for p in group]), transaction=len(group) > 1
            )
        except BaseException as exc:
            error: BaseException | None = exc
            stored = [False] * len(group)
        else:
            error = None
        for pending, ok in zip(group, stored, strict=True):
            if error is not None:
                pending.error = error
            elif not ok:
                pending.error = _lease_lost(self._db.location, pending.batch.thread_id)
            pending.done = True
            pending.wake.set()


def _lease_lost(location: str, thread_id: str) -> ThreadLeaseLost:
    return ThreadLeaseLost(
        f"{location}: thread {thread_id!r}: this run's lease ended (its lease connection "
        "dropped, or another run has taken the thread since); nothing more is written"
    )


async def _no_close(_: _GroupCommit) -> None:
    pass


class PostgresCheckpointer(AsyncResource):
    """A :class:`~deepactors.persistence.Checkpointer` in a PostgreSQL database.

    Tables are created on first use (``checkpoint_threads``,
    ``checkpoint_records``, and ``deepactors_migrations`` for the schema
    version). Connections are pooled per event-loop run: psycopg's async pool on
    asyncio, its sync pool in worker threads on trio; they close when that run
    ends or on :meth:`aclose`.

    Runs of one thread take turns through a session advisory lock held on a
    connection of its own for the whole run: in arrival order across processes
    (the server's lock queue), released at once when the holding process dies.

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host/db``).
        when_busy: ``"wait"`` (the default) for a thread another run holds,
            ``"raise"`` to fail with :class:`~deepactors.errors.ThreadBusy`.
        pool_size: Connections for reads and writes, per event-loop run.
        lease_connections: At most this many threads held at once per event-loop
            run (one connection each); more wait for a connection.
        clock: Wall-clock time recorded with each batch (``time.time``).
        checkout_timeout: Seconds a call waits in all for a pooled connection
            while every one is in use (30 by default); then it fails with
            :class:`~deepactors.errors.CheckpointUnavailable`, saying the pool is busy.
        down_wait: Seconds a call waits for a connection while the database is
            known to be down (1 by default), before it fails with
            :class:`~deepactors.errors.CheckpointUnavailable`.
        probe_after: Seconds a call waits for a pooled connection before it asks
            the server whether it is up (2 by default): the most an outage not
            yet known takes to be told.

    Raises:
        ConfigurationError: A bad argument (at once).
        CheckpointError: On first use, when the database cannot be reached.
        CheckpointSchemaMismatch: On first use, when the database holds
            checkpoints of a schema version this code does not know.
    """

    def __init__(
        self,
        dsn: str,
        *,
        when_busy: WhenBusy = "wait",
        pool_size: int = 4,
        lease_connections: int = 64,
        clock: Callable[[], float] = time.time,
        checkout_timeout: float = OPEN_TIMEOUT,
        down_wait: float = DOWN_WAIT,
        probe_after: float = PROBE_AFTER,
    ) -> None:
        if when_busy not in ("wait", "raise"):
            raise ConfigurationError(f"when_busy is 'wait' or 'raise', not {when_busy!r}")
        if pool_size < 1 or lease_connections < 1:
            raise ConfigurationError("pool_size and lease_connections must be at least 1")
        waits = PoolWaits(checkout=checkout_timeout, down=down_wait, probe_after=probe_after)
        try:
            self._db = PgDatabase(
                dsn,
                prepare=functools.partial(prepare_schema, MIGRATION),
                errors=PgErrors(
                    failed=CheckpointError,
                    corrupt=CheckpointCorrupt,
                    unavailable=CheckpointUnavailable,
                ),
                pool_size=pool_size,
                lease_connections=lease_connections,
                waits=waits,
            )
        except ValueError as exc:
            raise ConfigurationError(f"PostgresCheckpointer: {exc}") from None
        self._clock = clock
        self._leases = PgLeases(self._db, when_busy=when_busy)
        self._groups: PerLoop[_GroupCommit] = PerLoop(self._new_group, _no_close)

    async def _new_group(self) -> _GroupCommit:
        return _GroupCommit(self._db)

    def __repr__(self) -> str:
        return f"PostgresCheckpointer({self._db.location!r})"

    @property
    def location(self) -> str:
        """See :attr:`Checkpointer.location`: the database, without credentials."""
        return self._db.location

    async def ping(self) -> None:
        """Check the database answers (one round trip), for a readiness probe.

        Raises:
            CheckpointError: It does not, naming it.
        """
        await self._db.ping()

    async def reach(self) -> None:
        """Check a connection to the database can be had now, without a round trip.

        For a server about to start a run: while the database is down this
        fails within a few seconds, so the request is answered 503 instead
        of a run that would fail once started.

        Raises:
            CheckpointUnavailable: It cannot, naming the database and since
                when, or it is up but no connection came free in time (saying so).
        """
        await self._db.reach()

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[ThreadLease]:
        """See :meth:`Checkpointer.lease`.

        Runs of this object wait for each other in arrival order; the first then
        waits in the server's lock queue with the other processes' runs.
        """
        check_thread_id(thread_id)
        check_no_nul(thread_id, what="a thread_id")
        return self._leases.hold(thread_id)

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Checkpointer.put`.

        Raises:
            ThreadLeaseLost: This object holds the thread's lease, and its lease
                connection dropped or another run took the thread: nothing was stored.
        """
        await self._put(thread_id, _encoded(thread_id, records))

    async def put_encoded(self, thread_id: str, rows: Sequence[EncodedWrite]) -> None:
        """See :meth:`~deepactors.persistence.EncodedPut.put_encoded`.

        Raises:
            ThreadLeaseLost: As :meth:`put`.
        """
        await self._put(thread_id, _checked(thread_id, rows))

    async def _put(self, thread_id: str, rows: list[EncodedWrite]) -> None:
        if not rows:
            await anyio.lowlevel.checkpoint()
            return
        batch = await self._batch(thread_id, rows)
        group = await self._groups.get()
        await group.put(batch)

    async def _batch(self, thread_id: str, rows: list[EncodedWrite]) -> Batch:
        """``rows`` as a batch, fenced by this object's lease on the thread if it holds one.

        Raises:
            ThreadLeaseLost: The lease connection dropped.
        """
        held = self._leases.held(thread_id)
        if held is not None and not await held.connection.alive():
            raise _lease_lost(self._db.location, thread_id)
        return Batch(
            thread_id=thread_id,
            rows=rows,
            now=self._clock(),
            owner=None if held is None else held.owner,
            lock_key=None if held is None else held.lock_key,
        )

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        """See :meth:`Checkpointer.read`."""
        check_thread_id(thread_id)
        check_no_nul(thread_id, what="a thread_id")
        if path is not None:
            check_no_nul(check_text(path, what="a record's path"), what="a record's path")
        rows, seqs = await self._db.run(
            read_rows(thread_id, path, upto_seq), transaction=path is not None
        )
        decode = functools.partial(
            decode_records, self._db.location, thread_id, rows, seqs, filtered=path is not None
        )
        if sum(len(row[5]) for row in rows) > _DECODE_INLINE:
            return await anyio.to_thread.run_sync(decode)
        return decode()

    async def threads(self) -> list[ThreadInfo]:
        """See :meth:`Checkpointer.threads`."""
        return await self._db.run(list_threads(), transaction=False)

    async def delete_thread(self, thread_id: str) -> None:
        """See :meth:`Checkpointer.delete_thread`.

        Raises:
            ThreadLeaseLost: This object holds the thread's lease, and its lease
                connection dropped or another run took the thread: nothing was deleted.
        """
        check_thread_id(thread_id)
        check_no_nul(thread_id, what="a thread_id")
        held = self._leases.held(thread_id)
        if held is not None and not await held.connection.alive():
            raise _lease_lost(self._db.location, thread_id)
        deleted = await self._db.run(
            delete_thread(
                thread_id,
                owner=None if held is None else held.owner,
                lock_key=None if held is None else held.lock_key,
            )
        )
        if not deleted:
            raise _lease_lost(self._db.location, thread_id)

    async def replace(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Rewritable.replace`: a delete and a put in one transaction.

        Raises:
            ThreadLeaseLost: This object holds the thread's lease, and its lease
                connection dropped or another run took the thread: nothing was changed.
        """
        batch = await self._batch(thread_id, _encoded(thread_id, records))
        if not await self._db.run(replace_thread(batch)):
            raise _lease_lost(self._db.location, thread_id)

    async def aclose(self) -> None:
        """Close this event-loop run's pools now (idempotent, not final)."""
        try:
            await self._db.aclose()
        finally:
            await self._groups.aclose()


def _encoded(thread_id: str, records: Sequence[CheckpointWrite]) -> list[EncodedWrite]:
    """The records encoded, and every identifier free of NUL (PostgreSQL's text refuses it)."""
    _check_thread(thread_id)
    return _no_nul(encode_writes(records))


def _checked(thread_id: str, rows: Sequence[EncodedWrite]) -> list[EncodedWrite]:
    """Encoded ``rows`` checked as :func:`_encoded` checks records."""
    _check_thread(thread_id)
    return _no_nul(check_rows(rows))


def _check_thread(thread_id: str) -> None:
    check_thread_id(thread_id)
    check_no_nul(thread_id, what="a thread_id")


def _no_nul(rows: list[EncodedWrite]) -> list[EncodedWrite]:
    for path, _, kind, _ in rows:
        check_no_nul(path, what="a record's path")
        check_no_nul(kind, what="a record's kind")
    return rows

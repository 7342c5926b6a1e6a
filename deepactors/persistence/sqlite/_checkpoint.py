"""``SqliteCheckpointer``: checkpoint records and thread leases in a SQLite file.

Records are rows of ``checkpoint_records``, numbered per thread under the write
lock, so ``seq`` stays unique and gap-free whichever connection (thread, event
loop, process) writes, each with a checksum of its fields. Reading (see
``_records``) checks what it reads: ``seq`` 1, 2, 3... with none missing,
text that is UTF-8, data that is a JSON object, the checksum; anything else is
:class:`~deepactors.errors.CheckpointCorrupt` naming the file, the thread and
the record, never quoting the stored data.

Leases (see ``_lease``) live in the same file, so runs of one thread in
several processes take turns; while a run holds its thread, its writes to that
thread are fenced: refused once another run has taken the lease.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import final

import anyio
import anyio.lowlevel

from ...errors import (
    CheckpointCorrupt,
    CheckpointError,
    CheckpointFileLost,
    CheckpointSchemaMismatch,
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
from ._conn import BUSY_TIMEOUT, Database, Errors, Schema, SqliteBase
from ._integrity import record_crc
from ._lease import LEASE_DDL, SqliteLeases, holds_lease
from ._records import CRC_AFTER, list_threads, read_records

__all__ = ["CHECKPOINT_SCHEMA_VERSION", "SqliteCheckpointer"]

CHECKPOINT_SCHEMA_VERSION = 3
"""The version of the checkpoint tables this code writes and reads (2 added leases,
3 a checksum per record and each thread's head)."""

# A rowid table, not WITHOUT ROWID: records are 1-2 KB, and SQLite advises
# WITHOUT ROWID only for rows much smaller than a page. ``data`` comes last so
# that listing threads never reads it. ``crc`` is the checksum of the others
# (see ``_integrity.record_crc``), NULL only in a record older than the
# checksums (a file upgraded from version 2: see ``CRC_AFTER``).
_RECORDS_DDL = """CREATE TABLE checkpoint_records (
        thread_id  TEXT    NOT NULL,
        seq        INTEGER NOT NULL,
        path       TEXT    NOT NULL,
        step       INTEGER NOT NULL,
        kind       TEXT    NOT NULL,
        created_at REAL    NOT NULL,
        crc        INTEGER,
        data       TEXT    NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )"""

# Each thread's newest seq, kept by a trigger in the statement that inserts the
# record: a check on reads that the index lost none of the thread's last records
# (a checksum cannot tell a record that is not found). A second copy of what the
# primary-key index says, in other pages.
_HEADS_DDL = (
    """CREATE TABLE thread_heads (
        thread_id TEXT PRIMARY KEY,
        seq       INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TRIGGER thread_head AFTER INSERT ON checkpoint_records BEGIN
        INSERT INTO thread_heads (thread_id, seq) VALUES (new.thread_id, new.seq)
        ON CONFLICT (thread_id) DO UPDATE SET seq = excluded.seq;
    END""",
)

_SCHEMA = Schema(
    key="checkpoints",
    version=CHECKPOINT_SCHEMA_VERSION,
    ddl=(_RECORDS_DDL, *LEASE_DDL, *_HEADS_DDL),
    # Version 1 had no leases: adding the table is all it takes. The version is
    # raised even so, so that a process of an older deepactors, which would
    # ignore leases, refuses the file instead of running threads beside them.
    # Version 2 had no checksums: the old records keep none (NULL, not checked:
    # computing them now would vouch for whatever damage they already have,
    # and rewrite the whole file at open); their heads are taken from the index
    # (reading it only). The version is raised so that an older deepactors
    # cannot go on adding records without either.
    upgrades={
        1: LEASE_DDL,
        2: (
            "ALTER TABLE checkpoint_records ADD COLUMN crc INTEGER",
            f"INSERT INTO meta (key, value) SELECT '{CRC_AFTER}',"
            " CAST(coalesce(max(rowid), 0) AS TEXT) FROM checkpoint_records",
            *_HEADS_DDL,
            "INSERT INTO thread_heads (thread_id, seq)"
            " SELECT thread_id, max(seq) FROM checkpoint_records GROUP BY thread_id",
        ),
    },
)

_ERRORS = Errors(
    failed=CheckpointError,
    corrupt=CheckpointCorrupt,
    mismatch=CheckpointSchemaMismatch,
    lost=CheckpointFileLost,
    unavailable=CheckpointUnavailable,
)

_COLUMNS = "thread_id, seq, path, step, kind, created_at, data, crc"
_INSERT_RECORD = f"INSERT INTO checkpoint_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

_MAX_ONE_STATEMENT = 32
"""Records put with one statement; more take an explicit transaction."""

_HEADS_KEPT = 1024
"""Threads whose last ``seq`` a checkpointer remembers (the oldest forgotten first)."""


@functools.cache
def _insert_at(count: int, *, fenced: bool) -> str:
    """One INSERT of ``count`` numbered, checksummed records, if the thread's last seq is ``?3``.

    Fenced, only while the lease's owner ``?4`` holds the thread. Parameters:
    ``?1`` the thread, ``?2`` the time, ``?3`` the last seq expected, ``?4``
    the owner (None when not fenced), then six per record: its seq, path, step,
    kind, data and checksum. Nothing is inserted when the thread's last seq is
    another (a writer the caller did not know of) or the lease is not held.
    """
    values = ", ".join(
        f"(?1, ?{b}, ?{b + 1}, ?{b + 2}, ?{b + 3}, ?2, ?{b + 4}, ?{b + 5})"
        for b in range(5, 5 + 6 * count, 6)
    )
    sql = (
        f"INSERT INTO checkpoint_records ({_COLUMNS}) SELECT * FROM (VALUES {values})"
        " WHERE (SELECT coalesce(max(seq), 0) FROM checkpoint_records WHERE thread_id = ?1) = ?3"
    )
    if fenced:
        sql += " AND EXISTS (SELECT 1 FROM thread_leases WHERE thread_id = ?1 AND owner = ?4)"
    return sql


def _lease_lost(file: str, thread_id: str) -> ThreadLeaseLost:
    return ThreadLeaseLost(
        f"{file}: thread {thread_id!r} was taken over by another run after this run's lease "
        "lapsed (its event loop stalled longer than the lease lasts); nothing more is written"
    )


def _put_records(
    raw: sqlite3.Connection,
    *,
    file: str,
    thread_id: str,
    rows: list[EncodedWrite],
    now: float,
    owner: str | None,
    heads: dict[str, int],
) -> None:
    """Append ``rows`` to the thread, numbered after its last record (fenced: if leased).

    ``heads`` holds the last seq this checkpointer wrote or saw per thread: a
    guess, checked in the statement that inserts. With it, a few records
    (a step's, group-committed) are one statement, so one transaction without
    BEGIN, their seqs and checksums computed here (no SQL function called back
    per record). Without it, or when it is wrong, or for many records, one
    transaction reads the last seq first.
    """
    last = heads.get(thread_id)
    if last is not None and len(rows) <= _MAX_ONE_STATEMENT:
        cursor = raw.execute(
            _insert_at(len(rows), fenced=owner is not None),
            _numbered(thread_id, last, rows, now, owner),
        )
        if cursor.rowcount == len(rows):
            _remember(heads, thread_id, last + len(rows))
            return
        # Another writer moved the thread on, or the lease was lost: nothing
        # was inserted, and the transaction below tells which.
    # IMMEDIATE takes the write lock before reading the last seq, so another
    # process writing the same file cannot get the same numbers.
    raw.execute("BEGIN IMMEDIATE")
    try:
        if owner is not None and not holds_lease(raw, thread_id, owner):
            raise _lease_lost(file, thread_id)
        (last,) = raw.execute(
            "SELECT coalesce(max(seq), 0) FROM checkpoint_records WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        _insert_after(raw, thread_id=thread_id, last=last, rows=rows, now=now)
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    _remember(heads, thread_id, last + len(rows))


_remembering = threading.Lock()


def _remember(heads: dict[str, int], thread_id: str, last: int | None) -> None:
    """Note the thread's last seq (None: forget it), and forget the oldest past :data:`_HEADS_KEPT`.

    Under a lock: connections of several event loops (threads) may share ``heads``.
    """
    with _remembering:
        heads.pop(thread_id, None)
        if last is not None:
            heads[thread_id] = last
            if len(heads) > _HEADS_KEPT:
                del heads[next(iter(heads))]


def _numbered(
    thread_id: str, last: int, rows: list[EncodedWrite], now: float, owner: str | None
) -> list[object]:
    """The parameters of :func:`_insert_at`: the records numbered from ``last + 1``."""
    params: list[object] = [thread_id, now, last, owner]
    tid = thread_id.encode()
    for seq, (path, step, kind, data) in enumerate(rows, last + 1):
        crc = record_crc(tid, seq, path.encode(), step, kind.encode(), now, data.encode())
        params += (seq, path, step, kind, data, crc)
    return params


def _insert_after(
    raw: sqlite3.Connection, *, thread_id: str, last: int, rows: list[EncodedWrite], now: float
) -> None:
    """Insert ``rows`` numbered from ``last + 1`` (inside the caller's transaction)."""
    raw.executemany(
        _INSERT_RECORD,
        [
            (
                thread_id,
                last + i,
                path,
                step,
                kind,
                now,
                data,
                record_crc(
                    thread_id.encode(),
                    last + i,
                    path.encode(),
                    step,
                    kind.encode(),
                    now,
                    data.encode(),
                ),
            )
            for i, (path, step, kind, data) in enumerate(rows, 1)
        ],
    )


def _delete_rows(raw: sqlite3.Connection, thread_id: str) -> None:
    """The thread's records and head (inside the caller's transaction)."""
    raw.execute("DELETE FROM checkpoint_records WHERE thread_id = ?", (thread_id,))
    raw.execute("DELETE FROM thread_heads WHERE thread_id = ?", (thread_id,))


def _delete_thread(
    raw: sqlite3.Connection,
    *,
    file: str,
    thread_id: str,
    owner: str | None,
    heads: dict[str, int],
) -> None:
    """Delete the thread's records (fenced: only while ``owner`` holds its lease).

    The lease row stays: its holder goes on holding the now empty thread.
    """
    # IMMEDIATE: nobody can take the lease between the check and the delete.
    raw.execute("BEGIN IMMEDIATE")
    try:
        if owner is not None and not holds_lease(raw, thread_id, owner):
            raise _lease_lost(file, thread_id)
        _delete_rows(raw, thread_id)
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    _remember(heads, thread_id, 0)


def _replace_records(
    raw: sqlite3.Connection,
    *,
    file: str,
    thread_id: str,
    rows: list[EncodedWrite],
    now: float,
    owner: str | None,
    heads: dict[str, int],
) -> None:
    """The thread's records become ``rows`` (``seq`` 1..n), in one transaction (fenced)."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        if owner is not None and not holds_lease(raw, thread_id, owner):
            raise _lease_lost(file, thread_id)
        _delete_rows(raw, thread_id)
        _insert_after(raw, thread_id=thread_id, last=0, rows=rows, now=now)
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    _remember(heads, thread_id, len(rows))


@final
class SqliteCheckpointer(SqliteBase):
    """A :class:`~deepactors.persistence.Checkpointer` in a SQLite file.

    Records are rows of ``checkpoint_records`` holding their data as compact JSON
    text, in WAL mode with ``synchronous=NORMAL``: each ``put`` is one
    transaction and one commit, durable against a crash of the process.

    The connection opens on first use in the running event loop (aiosqlite on
    asyncio, ``sqlite3`` in worker threads on trio) and closes by itself when
    that event-loop run ends. Parent folders of ``path`` are created.

    Runs of one thread take turns through a lease kept in the file (see
    :meth:`lease`), across processes too. The lease expires ``lease_ttl``
    seconds after its last renewal (renewed every third of that while its run
    lives), or at once when the process holding it on this machine is gone.

    Args:
        path: The database file. It may be shared with a :class:`SqliteStore`.
        when_busy: ``"wait"`` (the default) for a thread another run holds,
            ``"raise"`` to fail with :class:`~deepactors.errors.ThreadBusy`.
        lease_ttl: Seconds a lease lasts without renewal.
        clock: Wall-clock time for records and lease expiries (``time.time``).
        busy_timeout: Seconds a call waits for another writer's lock on the file
            (another process, say) before it fails with
            :class:`~deepactors.errors.CheckpointUnavailable` (5 by default).

    Raises:
        ConfigurationError: ``when_busy``, ``lease_ttl`` or ``busy_timeout`` is
            out of range.
        CheckpointCorrupt: On first use, when the file is not SQLite or is damaged.
        CheckpointSchemaMismatch: On first use, when the file holds checkpoints of
            another schema version.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        when_busy: WhenBusy = "wait",
        lease_ttl: float = 30.0,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        if when_busy not in ("wait", "raise"):
            raise ConfigurationError(f"when_busy is 'wait' or 'raise', not {when_busy!r}")
        if not lease_ttl > 0:
            raise ConfigurationError(
                f"lease_ttl must be a positive number of seconds, not {lease_ttl!r}"
            )
        self._db = Database(path, schema=_SCHEMA, errors=_ERRORS, busy_timeout=busy_timeout)
        self._clock = clock
        # The last seq this object wrote per thread: with it, a put numbers and
        # checksums its records before its statement (see ``_put_records``).
        self._heads: dict[str, int] = {}
        # Puts on a thread held through these leases are fenced with its token.
        self._leases = SqliteLeases(
            self._db, when_busy=when_busy, ttl=float(lease_ttl), clock=clock
        )

    @property
    def location(self) -> str:
        """See :attr:`Checkpointer.location`: the file."""
        return self._db.file

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Checkpointer.put`.

        Raises:
            ThreadLeaseLost: This object holds the thread's lease, and it lapsed
                and was taken by another run: nothing was stored.
        """
        check_thread_id(thread_id)
        await self._put(thread_id, encode_writes(records))

    async def put_encoded(self, thread_id: str, rows: Sequence[EncodedWrite]) -> None:
        """See :meth:`~deepactors.persistence.EncodedPut.put_encoded`.

        Raises:
            ThreadLeaseLost: As :meth:`put`.
        """
        check_thread_id(thread_id)
        await self._put(thread_id, check_rows(rows))

    def _put(self, thread_id: str, rows: list[EncodedWrite]) -> Awaitable[None]:
        # Not a coroutine of its own: the caller awaits the store itself (a
        # frame less on a path every step of a durable run takes).
        if not rows:
            return anyio.lowlevel.checkpoint()
        return self._db.run(
            functools.partial(
                _put_records,
                file=self._db.file,
                thread_id=thread_id,
                rows=rows,
                # A float, as the REAL column gives it back: the checksum's input.
                now=float(self._clock()),
                owner=self._leases.owner_of(thread_id),
                heads=self._heads,
            )
        )

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        """See :meth:`Checkpointer.read`."""
        check_thread_id(thread_id)
        if path is not None:
            check_text(path, what="a record's path")
        return await self._db.run(
            functools.partial(
                read_records,
                file=self._db.file,
                thread_id=thread_id,
                path=path,
                upto_seq=upto_seq,
            )
        )

    async def threads(self) -> list[ThreadInfo]:
        """See :meth:`Checkpointer.threads`."""
        return await self._db.run(functools.partial(list_threads, file=self._db.file))

    async def delete_thread(self, thread_id: str) -> None:
        """See :meth:`Checkpointer.delete_thread`.

        Raises:
            ThreadLeaseLost: This object holds the thread's lease, and it lapsed
                and was taken by another run: nothing was deleted.
        """
        check_thread_id(thread_id)
        await self._db.run(
            functools.partial(
                _delete_thread,
                file=self._db.file,
                thread_id=thread_id,
                owner=self._leases.owner_of(thread_id),
                heads=self._heads,
            )
        )

    async def replace(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Rewritable.replace`.

        Raises:
            ThreadLeaseLost: This object holds the thread's lease, and it lapsed
                and was taken by another run: nothing was changed.
        """
        check_thread_id(thread_id)
        rows = encode_writes(records)
        await self._db.run(
            functools.partial(
                _replace_records,
                file=self._db.file,
                thread_id=thread_id,
                rows=rows,
                now=float(self._clock()),
                owner=self._leases.owner_of(thread_id),
                heads=self._heads,
            )
        )

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[ThreadLease]:
        """See :meth:`Checkpointer.lease`.

        Runs of this object wait for each other in arrival order; then the
        lease in the file is taken, polling (5 ms, growing to 250 ms) while
        another process holds it. Waiting counts against the caller's deadline.
        """
        check_thread_id(thread_id)
        return self._leases.hold(thread_id)

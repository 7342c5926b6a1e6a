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
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
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
from ._lease import LEASE_DDL, SqliteLeases
from ._records import CRC_AFTER, list_threads, read_records
from ._writes import delete_records, put_records, remember, replace_records

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
        # checksums its records before its statement (see ``_writes.put_records``).
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
                put_records,
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
                delete_records,
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
                replace_records,
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
        return self._held(thread_id)

    @asynccontextmanager
    async def _held(self, thread_id: str) -> AsyncIterator[ThreadLease]:
        async with self._leases.hold(thread_id) as lease:
            # Nobody else writes the thread while it is held: its first put
            # numbers its records from the head, in one statement.
            remember(self._heads, thread_id, lease.head)
            yield lease

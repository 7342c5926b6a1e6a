"""Writing checkpoint records to SQLite: numbered, checksummed, fenced, in one statement.

Each function here is one operation run in the connection's thread (the
counterpart of ``_records``, which reads). A put appends records numbered after
the thread's last ``seq`` (gap-free whichever connection writes), each with the
checksum of its fields (``_integrity.record_crc``), only while the run that
writes holds the thread's lease when it holds one (fenced); deleting and
replacing a thread are fenced the same way.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Iterator

from ...errors import ThreadLeaseLost
from .._checkpoint import EncodedWrite
from ._integrity import record_crc
from ._lease import holds_lease

__all__ = ["delete_records", "put_records", "remember", "replace_records"]

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


@contextlib.contextmanager
def _fenced(
    raw: sqlite3.Connection, *, file: str, thread_id: str, owner: str | None
) -> Iterator[None]:
    """One IMMEDIATE transaction, only while ``owner`` holds the thread (if leased).

    IMMEDIATE takes the write lock first: nobody takes the lease, or numbers
    records of the same file, between the checks and the writes.
    """
    raw.execute("BEGIN IMMEDIATE")
    try:
        if owner is not None and not holds_lease(raw, thread_id, owner):
            raise _lease_lost(file, thread_id)
        yield
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def put_records(
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

    Raises:
        ThreadLeaseLost: ``owner`` no longer holds the thread: nothing was stored.
        sqlite3.Error: From SQLite (the caller translates it).
    """
    last = heads.get(thread_id)
    if last is not None and len(rows) <= _MAX_ONE_STATEMENT:
        cursor = raw.execute(
            _insert_at(len(rows), fenced=owner is not None),
            _numbered(thread_id, last, rows, now, owner),
        )
        if cursor.rowcount == len(rows):
            remember(heads, thread_id, last + len(rows))
            return
        # Another writer moved the thread on, or the lease was lost: nothing
        # was inserted, and the transaction below tells which.
    # The write lock is taken before the last seq is read, so another process
    # writing the same file cannot get the same numbers.
    with _fenced(raw, file=file, thread_id=thread_id, owner=owner):
        (last,) = raw.execute(
            "SELECT coalesce(max(seq), 0) FROM checkpoint_records WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        _insert_after(raw, thread_id=thread_id, last=last, rows=rows, now=now)
    remember(heads, thread_id, last + len(rows))


def remember(heads: dict[str, int], thread_id: str, last: int | None) -> None:
    """Note the thread's last seq (None: forget it), and forget the oldest past :data:`_HEADS_KEPT`.

    Connections of several event loops (threads) may share ``heads``, and the
    loop itself notes a lease's head: single dict operations, no lock. Should
    two threads race, a note may be stale: the statement that uses it checks it.
    """
    heads.pop(thread_id, None)  # noted again at the end: the oldest go first
    if last is None:
        return
    heads[thread_id] = last
    if len(heads) > _HEADS_KEPT:
        # Changed by another thread meanwhile: a later note forgets one.
        with contextlib.suppress(RuntimeError, KeyError, StopIteration):
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


def delete_records(
    raw: sqlite3.Connection,
    *,
    file: str,
    thread_id: str,
    owner: str | None,
    heads: dict[str, int],
) -> None:
    """Delete the thread's records (fenced: only while ``owner`` holds its lease).

    The lease row stays: its holder goes on holding the now empty thread.

    Raises:
        ThreadLeaseLost: ``owner`` no longer holds the thread: nothing was deleted.
        sqlite3.Error: From SQLite (the caller translates it).
    """
    with _fenced(raw, file=file, thread_id=thread_id, owner=owner):
        _delete_rows(raw, thread_id)
    remember(heads, thread_id, 0)


def replace_records(
    raw: sqlite3.Connection,
    *,
    file: str,
    thread_id: str,
    rows: list[EncodedWrite],
    now: float,
    owner: str | None,
    heads: dict[str, int],
) -> None:
    """The thread's records become ``rows`` (``seq`` 1..n), in one transaction (fenced).

    Raises:
        ThreadLeaseLost: ``owner`` no longer holds the thread: nothing was changed.
        sqlite3.Error: From SQLite (the caller translates it).
    """
    with _fenced(raw, file=file, thread_id=thread_id, owner=owner):
        _delete_rows(raw, thread_id)
        _insert_after(raw, thread_id=thread_id, last=0, rows=rows, now=now)
    remember(heads, thread_id, len(rows))

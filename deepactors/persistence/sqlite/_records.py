"""Reading checkpoint records back from SQLite, checking each one as it is read.

Each function here is one operation run in the connection's thread (decoding
included, so a long thread does not stall the event loop). What is read is
checked: ``seq`` 1, 2, 3... with none missing, text that is UTF-8, data that is
a JSON object, and the record's checksum (see ``_integrity``); anything
else is :class:`~deepactors.errors.CheckpointCorrupt` naming the file, the
thread and the record, never quoting the stored data.

:func:`list_threads` is a summary read from the primary-key index and the
newest record's time; it reads no record's data, so it checks no checksum.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from ...errors import CheckpointCorrupt
from .._checkpoint import CheckpointRecord, ThreadInfo
from .._json import decode_object
from ._conn import text
from ._integrity import record_crc

__all__ = ["CRC_AFTER", "list_threads", "read_records"]

# The meta row holding the highest rowid written before checksums: a record
# without one above it lost its checksum to damage (its type byte, say), and is
# not read as an old, unchecked record. Absent from a file made with checksums.
CRC_AFTER = "checkpoint_crc_after"

# Text columns are read as blobs and decoded here (see ``_conn.text``).
_SELECT_RECORDS = (
    "SELECT seq, CAST(path AS BLOB), step, CAST(kind AS BLOB), created_at, CAST(data AS BLOB),"
    " crc, rowid FROM checkpoint_records WHERE thread_id = ?"
)


def _integer(value: object, what: str) -> int:
    if type(value) is not int:
        raise ValueError(f"{what} is not an integer")
    return value


def _record(thread_id: str, seq: int, row: tuple[Any, ...]) -> CheckpointRecord:
    """One row as a record. Raises ValueError saying which column is bad."""
    _, path, step, kind, created_at, data = row[:6]
    if not isinstance(created_at, int | float):
        raise ValueError("its time is not a number")
    json_text = text(data, what="its data")
    try:
        decoded = decode_object(json_text)
    except RecursionError:
        raise ValueError("its data is nested too deeply to be JSON written here") from None
    except ValueError as exc:
        raise ValueError(f"its data is not a JSON object ({exc})") from None
    return CheckpointRecord(
        thread_id=thread_id,
        seq=seq,
        path=text(path, what="its path"),
        step=_integer(step, "its step"),
        kind=text(kind, what="its kind"),
        data=decoded,
        created_at=float(created_at),
    )


def read_records(
    raw: sqlite3.Connection,
    *,
    file: str,
    thread_id: str,
    path: str | None,
    upto_seq: int | None,
) -> list[CheckpointRecord]:
    """The thread's records (of one actor ``path``, up to ``upto_seq``), checked.

    Raises:
        CheckpointCorrupt: A record is missing, unreadable, or not what was written.
    """
    sql = _SELECT_RECORDS
    params: list[object] = [thread_id]
    if path is not None:
        sql += " AND path = ?"
        params.append(path)
    if upto_seq is not None:
        sql += " AND seq <= ?"
        params.append(upto_seq)
    sql += " ORDER BY seq"
    with _snapshot(raw):
        return _read(raw, file, thread_id, path, sql, params, upto_seq)


@contextlib.contextmanager
def _snapshot(raw: sqlite3.Connection) -> Iterator[None]:
    """One read transaction around reads that must agree: another process may
    commit between two statements (records, then a head that has moved on)."""
    if raw.in_transaction:
        yield
        return
    raw.execute("BEGIN")
    try:
        yield
    finally:
        raw.execute("COMMIT")  # a read: ends the snapshot, writes nothing


def _read(
    raw: sqlite3.Connection,
    file: str,
    thread_id: str,
    path: str | None,
    sql: str,
    params: list[object],
    upto_seq: int | None,
) -> list[CheckpointRecord]:
    head = _head(raw, file, thread_id) if path is None else 0
    out: list[CheckpointRecord] = []
    expected = 1
    unchecked: list[int] = []  # see _check_crc: read once, if a record has no checksum
    # Decoded here, in the connection's thread, so a long thread does not stall
    # the event loop.
    for row in raw.execute(sql, params):
        seq = _checked_seq(file, thread_id, row[0], expected if path is None else None)
        expected = seq + 1
        try:
            out.append(_record(thread_id, seq, row))
            # After decoding, so that a field that cannot be read is named as such.
            _check_crc(raw, thread_id, seq, row, unchecked)
        except ValueError as exc:
            raise CheckpointCorrupt(
                f"{file}: thread {thread_id!r}, record seq {seq}: {exc}"
            ) from None
    if path is not None:
        _check_seqs(raw, file, thread_id, upto_seq)
    else:
        _check_head(file, thread_id, expected - 1, head, upto_seq)
    return out


def _head(raw: sqlite3.Connection, file: str, thread_id: str) -> int:
    """The newest seq the thread was written up to (0: none), as its head table says."""
    found = raw.execute("SELECT seq FROM thread_heads WHERE thread_id = ?", (thread_id,)).fetchone()
    head = found[0] if found is not None else 0
    if type(head) is not int:
        raise CheckpointCorrupt(f"{file}: thread {thread_id!r}: its newest seq is not an integer")
    return head


def _check_head(file: str, thread_id: str, last: int, head: int, upto_seq: int | None) -> None:
    """Check that the newest record found is the thread's head (or ``upto_seq``).

    Records are found through the primary-key index; damage there can hide the
    newest ones, and a gap check cannot see a missing tail. (Read in one
    snapshot with the records: see :func:`_snapshot`.)
    """
    want = head if upto_seq is None else min(head, max(upto_seq, 0))
    if last != want:
        raise CheckpointCorrupt(
            f"{file}: thread {thread_id!r}: its records end at seq {last},"
            f" but it was written up to seq {head}"
        )


def _check_crc(
    raw: sqlite3.Connection, thread_id: str, seq: int, row: tuple[Any, ...], unchecked: list[int]
) -> None:
    """Raise ValueError unless the row's checksum matches what was read (types checked).

    ``unchecked`` caches, for one read, the highest rowid written before checksums.
    """
    _, path, step, kind, created_at, data, crc, rowid = row
    if crc is None:
        # An old record (written before checksums) has none; a newer one lost it.
        if not unchecked:
            found = raw.execute("SELECT value FROM meta WHERE key = ?", (CRC_AFTER,)).fetchone()
            after = found[0] if found is not None else "0"
            # A damaged meta row vouches for nothing.
            unchecked.append(int(after) if isinstance(after, str) and after.isdigit() else 0)
        if not (type(rowid) is int and rowid <= unchecked[0]):
            raise ValueError("its checksum is missing")
        return
    if crc != record_crc(thread_id.encode(), seq, path, step, kind, created_at, data):
        raise ValueError(
            "its checksum does not match its contents (changed outside deepactors:"
            " a damaged disk or file, or a hand edit)"
        )


def _checked_seq(file: str, thread_id: str, seq: object, expected: int | None) -> int:
    where = f"{file}: thread {thread_id!r}"
    if type(seq) is not int:
        raise CheckpointCorrupt(f"{where}: a record's seq is not an integer")
    if expected is not None and seq != expected:
        if seq > expected:
            raise CheckpointCorrupt(
                f"{where}: record seq {expected} is missing (the records go on at seq {seq})"
            )
        raise CheckpointCorrupt(f"{where}: record seq {seq} is out of sequence (seqs start at 1)")
    return seq


def _check_seqs(raw: sqlite3.Connection, file: str, thread_id: str, upto_seq: int | None) -> None:
    """Check that the thread's seqs are 1, 2, 3... (reading one actor's records skips some)."""
    sql = "FROM checkpoint_records WHERE thread_id = ?"
    params: list[object] = [thread_id]
    if upto_seq is not None:
        sql += " AND seq <= ?"
        params.append(upto_seq)
    count, low, high = raw.execute(f"SELECT count(*), min(seq), max(seq) {sql}", params).fetchone()
    # Distinct integers (the primary key) from 1 to count are exactly 1..count.
    if count == 0 or (type(high) is int and low == 1 and high == count):
        _check_head(file, thread_id, high or 0, _head(raw, file, thread_id), upto_seq)
        return
    expected = 1
    for (seq,) in raw.execute(f"SELECT seq {sql} ORDER BY seq", params):
        expected = _checked_seq(file, thread_id, seq, expected) + 1


def list_threads(raw: sqlite3.Connection, *, file: str) -> list[ThreadInfo]:
    """Every thread with its record count, newest seq and newest record's time.

    Raises:
        CheckpointCorrupt: A seq or thread id is unreadable, or a thread's newest
            records are missing.
    """
    with _snapshot(raw):  # the listing and the heads as of one moment
        return _list_threads(raw, file)


def _list_threads(raw: sqlite3.Connection, file: str) -> list[ThreadInfo]:
    # Counting walks the primary-key index only; one lookup per thread fetches
    # the newest record's time.
    rows = raw.execute(
        "SELECT CAST(t.thread_id AS BLOB), t.n, t.last, r.created_at FROM"
        " (SELECT thread_id, count(*) AS n, max(seq) AS last"
        "  FROM checkpoint_records GROUP BY thread_id) AS t"
        " JOIN checkpoint_records AS r ON r.thread_id = t.thread_id AND r.seq = t.last"
        " ORDER BY t.thread_id"
    ).fetchall()
    try:
        listing = [
            ThreadInfo(
                thread_id=text(tid, what="a thread id"),
                records=n,
                last_seq=_integer(last, "a record's seq"),
                updated_at=float(at),
            )
            for tid, n, last, at in rows
        ]
    except (ValueError, TypeError) as exc:
        raise CheckpointCorrupt(f"{file}: {exc}") from None
    # As a read does (see _check_head), against the heads: a thread whose newest
    # records (or all of them) the index lost is not listed short, or left out.
    try:
        heads = {
            text(tid, what="a thread id"): seq
            for tid, seq in raw.execute("SELECT CAST(thread_id AS BLOB), seq FROM thread_heads")
        }
    except ValueError as exc:
        raise CheckpointCorrupt(f"{file}: {exc}") from None
    for info in listing:
        head = heads.pop(info.thread_id, 0)
        if head != info.last_seq:
            raise CheckpointCorrupt(
                f"{file}: thread {info.thread_id!r}: its records end at seq {info.last_seq},"
                f" but it was written up to seq {head}"
            )
    if heads:
        raise CheckpointCorrupt(
            f"{file}: {len(heads)} thread(s) written to have no records left (damaged index)"
        )
    return listing

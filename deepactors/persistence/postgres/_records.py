"""The checkpoint tables in PostgreSQL, and the operations on them (``_sql`` style).

``checkpoint_threads`` has a row per thread: ``last_seq``, the last number
given out, and ``owner``, the token of the lease that last took the thread.
A put bumps ``last_seq`` by its batch's size and inserts the batch's records
under those numbers, in one statement: the row lock on the thread's row
serialises writers of one thread across connections and processes, so ``seq``
stays unique and gap-free, and writers of other threads do not wait.

A fenced put or delete (its run holds the thread's lease) changes the row
only while ``owner`` is its token *and* somebody holds the thread's advisory
lock (see ``_lease``): a holder whose lease connection dropped, or whose
thread was taken over since, stores (or deletes) nothing and gets
:class:`~deepactors.errors.ThreadLeaseLost`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import CheckpointCorrupt, CheckpointSchemaMismatch
from .._checkpoint import CheckpointRecord, EncodedWrite, ThreadInfo
from .._json import decode_object
from ._sql import Migration, Op, Stmt

__all__ = [
    "MIGRATION",
    "PG_CHECKPOINT_SCHEMA_VERSION",
    "Batch",
    "claim_thread",
    "decode_records",
    "delete_thread",
    "list_threads",
    "put_batches",
    "read_rows",
]

PG_CHECKPOINT_SCHEMA_VERSION = 1
"""The version of the PostgreSQL checkpoint tables this code writes and reads."""

# "C" collation: ``threads()`` sorts as Python sorts strings (by code point).
# ``data`` is text, not jsonb: the stored bytes are exactly the JSON written,
# key order and escapes included, as in SQLite.
MIGRATION = Migration(
    component="checkpoints",
    version=PG_CHECKPOINT_SCHEMA_VERSION,
    ddl=(
        """CREATE TABLE checkpoint_threads (
            thread_id text COLLATE "C" PRIMARY KEY,
            last_seq  bigint NOT NULL DEFAULT 0,
            owner     text
        )""",
        """CREATE TABLE checkpoint_records (
            thread_id  text COLLATE "C" NOT NULL,
            seq        bigint NOT NULL,
            path       text NOT NULL,
            step       bigint NOT NULL,
            kind       text NOT NULL,
            created_at double precision NOT NULL,
            data       text NOT NULL,
            PRIMARY KEY (thread_id, seq)
        )""",
    ),
    mismatch=CheckpointSchemaMismatch,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """One put: its thread, its encoded records, its time, and its fence (or None)."""

    thread_id: str
    rows: Sequence[EncodedWrite]
    now: float
    owner: str | None
    lock_key: int | None


# The records of a batch, numbered after the head the first CTE moved on. The
# records are a VALUES list, not arrays: psycopg escapes every quote of every
# element of a text array in Python, which costs more than the rest of a put.
_INSERT_FROM_HEAD = (
    "INSERT INTO checkpoint_records (thread_id, seq, path, step, kind, created_at, data)"
    " SELECT %s, head.last_seq - %s + r.ord, r.path, r.step, r.kind, %s, r.data"
    " FROM head, (VALUES {values}) AS r(path, step, kind, data, ord)"
)
_PUT = (
    "WITH head AS (INSERT INTO checkpoint_threads AS h (thread_id, last_seq)"
    " VALUES (%s, %s) ON CONFLICT (thread_id)"
    " DO UPDATE SET last_seq = h.last_seq + excluded.last_seq RETURNING last_seq) "
    + _INSERT_FROM_HEAD
)
# ``pg_try_advisory_xact_lock_shared`` fails exactly while a session holds the
# thread's lock: when it succeeds, the holder's lease connection is gone.
_PUT_FENCED = (
    "WITH head AS (UPDATE checkpoint_threads SET last_seq = last_seq + %s"
    " WHERE thread_id = %s AND owner = %s"
    " AND NOT pg_try_advisory_xact_lock_shared(%s) RETURNING last_seq) " + _INSERT_FROM_HEAD
)


@functools.lru_cache(maxsize=64)
def _put_sql(fenced: bool, n: int) -> str:
    """The statement for a batch of ``n`` records (one text per size: prepared once)."""
    rows = ["(%s::text, %s::bigint, %s::text, %s::text, 1::bigint)"]
    rows += [f"(%s, %s, %s, %s, {i})" for i in range(2, n + 1)]
    return (_PUT_FENCED if fenced else _PUT).format(values=", ".join(rows))


def _params(batch: Batch) -> list[object]:
    n = len(batch.rows)
    head: list[object] = (
        [batch.thread_id, n]
        if batch.owner is None
        else [n, batch.thread_id, batch.owner, batch.lock_key]
    )
    params = [*head, batch.thread_id, n, batch.now]
    for row in batch.rows:
        params.extend(row)
    return params


def put_batches(batches: Sequence[Batch]) -> Op[list[bool]]:
    """Store each batch (one statement each); False for a fenced batch refused.

    Several batches run in one transaction (group commit), in thread order so
    that two processes committing groups never lock two threads' rows in
    opposite orders; one thread's batches keep their order.
    """
    order = sorted(range(len(batches)), key=lambda i: batches[i].thread_id)
    stored = [False] * len(batches)
    for i in order:
        batch = batches[i]
        sql = _put_sql(batch.owner is not None, len(batch.rows))
        result = yield Stmt(sql, _params(batch))
        stored[i] = result.rowcount == len(batch.rows)
    return stored


def claim_thread(thread_id: str, owner: str) -> Op[tuple[int, float | None]]:
    """Make ``owner`` the thread's lease token; returns the thread's head and origin
    (when its first record was stored; None: it has none).

    Run by a new holder once it has the advisory lock. The update waits for any
    put of the previous holder in flight (the row lock); after it, that holder's
    fenced puts are refused, so the head read next is final for this lease.
    """
    yield Stmt(
        "INSERT INTO checkpoint_threads AS h (thread_id, owner) VALUES (%s, %s)"
        " ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner",
        (thread_id, owner),
    )
    head, origin = (
        yield Stmt(
            "SELECT coalesce(max(seq), 0), (SELECT created_at FROM checkpoint_records"
            " WHERE thread_id = %s AND seq = 1) FROM checkpoint_records WHERE thread_id = %s",
            (thread_id, thread_id),
        )
    ).rows[0]
    return int(head), None if origin is None else float(origin)


# Raw rows of a read: (seq, path, step, kind, created_at, data).
Row = tuple[Any, ...]


def read_rows(
    thread_id: str, path: str | None, upto_seq: int | None
) -> Op[tuple[list[Row], list[int] | None]]:
    """The thread's rows in ``seq`` order; when filtering by path and the whole
    thread (up to ``upto_seq``) has a gap, also every seq of it, to name the gap."""
    where = "WHERE thread_id = %s"
    params: list[object] = [thread_id]
    if upto_seq is not None:
        where += " AND seq <= %s"
        params.append(upto_seq)
    seqs: list[int] | None = None
    if path is not None:
        result = yield Stmt(
            f"SELECT count(*), min(seq), max(seq) FROM checkpoint_records {where}", params
        )
        count, low, high = result.rows[0]
        # Distinct integers (the primary key) from 1 to count are exactly 1..count.
        if count and not (low == 1 and high == count):
            result = yield Stmt(f"SELECT seq FROM checkpoint_records {where} ORDER BY seq", params)
            seqs = [row[0] for row in result.rows]
        where += " AND path = %s"
        params.append(path)
    rows = (
        yield Stmt(
            "SELECT seq, path, step, kind, created_at, data FROM checkpoint_records"
            f" {where} ORDER BY seq",
            params,
        )
    ).rows
    return rows, seqs


def _check_seqs(where: str, seqs: list[int]) -> None:
    expected = 1
    for seq in seqs:
        if seq != expected:
            raise CheckpointCorrupt(
                f"{where}: record seq {expected} is missing (the records go on at seq {seq})"
                if seq > expected
                else f"{where}: record seq {seq} is out of sequence (seqs start at 1)"
            )
        expected = seq + 1


def decode_records(
    location: str,
    thread_id: str,
    rows: list[Row],
    seqs: list[int] | None,
    *,
    filtered: bool,
) -> list[CheckpointRecord]:
    """Check and decode a read's rows (CPU: call it in a worker thread when long).

    Raises:
        CheckpointCorrupt: A record is missing, or one cannot be decoded; the
            message names the database, thread and seq, never the data.
    """
    where = f"{location}: thread {thread_id!r}"
    _check_seqs(where, seqs if seqs is not None else [] if filtered else [r[0] for r in rows])
    out: list[CheckpointRecord] = []
    for seq, path, step, kind, created_at, data in rows:
        try:
            decoded = decode_object(data)
        except RecursionError:
            raise CheckpointCorrupt(
                f"{where}, record seq {seq}: its data is nested too deeply to be JSON written here"
            ) from None
        except ValueError as exc:
            raise CheckpointCorrupt(
                f"{where}, record seq {seq}: its data is not a JSON object ({exc})"
            ) from None
        out.append(
            CheckpointRecord(
                thread_id=thread_id,
                seq=seq,
                path=path,
                step=step,
                kind=kind,
                data=decoded,
                created_at=created_at,
            )
        )
    return out


def list_threads() -> Op[list[ThreadInfo]]:
    """Every thread with records, sorted by id (counting walks the primary key)."""
    rows = (
        yield Stmt(
            "SELECT t.thread_id, t.n, t.last, r.created_at FROM"
            " (SELECT thread_id, count(*) AS n, max(seq) AS last"
            "  FROM checkpoint_records GROUP BY thread_id) AS t"
            " JOIN checkpoint_records AS r ON r.thread_id = t.thread_id AND r.seq = t.last"
            " ORDER BY t.thread_id"
        )
    ).rows
    return [
        ThreadInfo(thread_id=tid, records=int(n), last_seq=int(last), updated_at=float(at))
        for tid, n, last, at in rows
    ]


def delete_thread(thread_id: str, *, owner: str | None, lock_key: int | None) -> Op[bool]:
    """Remove the thread's records; its numbering starts again at 1.

    The thread's row is locked first, as a put locks it, so a put in flight
    lands wholly before or wholly after. The row itself stays, with its lease
    token: a holder's fenced puts go on, numbered from 1.

    Fenced (``owner`` given), the row is reset only under the same condition
    as a fenced put's; when it is not, nothing is deleted and False returned.
    """
    if owner is None:
        yield Stmt("UPDATE checkpoint_threads SET last_seq = 0 WHERE thread_id = %s", (thread_id,))
    else:
        reset = yield Stmt(
            "UPDATE checkpoint_threads SET last_seq = 0 WHERE thread_id = %s AND owner = %s"
            " AND NOT pg_try_advisory_xact_lock_shared(%s)",
            (thread_id, owner, lock_key),
        )
        if reset.rowcount != 1:
            return False
    yield Stmt("DELETE FROM checkpoint_records WHERE thread_id = %s", (thread_id,))
    return True


def replace_thread(batch: Batch) -> Op[bool]:
    """The thread's records become ``batch``'s (``seq`` 1..n), in the caller's transaction.

    :func:`delete_thread` then the batch's put, fenced alike: False (nothing
    changed, the transaction to be rolled back) when the lease is not ``batch.owner``'s.
    """
    deleted = yield from delete_thread(batch.thread_id, owner=batch.owner, lock_key=batch.lock_key)
    if not deleted:
        return False
    if not batch.rows:
        return True
    (stored,) = yield from put_batches([batch])
    if not stored:
        # The delete's fence held in this same transaction, so the put's holds
        # too; were it ever refused, the raise rolls the delete back with it.
        raise RuntimeError(f"thread {batch.thread_id!r}: records deleted but not replaced")
    return True

"""``SqliteThreadMetadata``: what a server says about its threads, beside their checkpoints.

The Agent Protocol gives every thread metadata of its own (a client's tags, the
assistant it runs, and with authentication its owner) that is not the thread's
state: the checkpointer keeps records, not this. A server that kept it in memory
alone lost it at every restart, owners included, so every user's threads were
nobody's. This keeps it in a table of the checkpointer's own SQLite file, one row
per thread, each with a checksum as the checkpoint records have (a row damaged
on disk is an error, never an owner read wrong).

The table is its own schema component (``thread_metadata`` in ``meta``), so a
checkpoint file of an older deepactors gains it without changing version.
Version 2 keeps each thread's time to live (``ttl``, seconds of idleness before
the server deletes it; NULL: none) in the row too, under the same checksum.
Version 3 adds what the server does then (``ttl_strategy``: NULL for ``delete``,
or ``keep_latest``, its history dropped and its latest state kept), under the
checksum too: it is the checksum's tag, so rows without one read as before.
"""

from __future__ import annotations

import functools
import math
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal, final

from ...errors import (
    CheckpointCorrupt,
    CheckpointError,
    CheckpointFileLost,
    CheckpointUnavailable,
)
from .._checkpoint import check_thread_id
from .._json import decode_object, encode_object
from ._conn import Database, Errors, Schema, SqliteBase, text
from ._integrity import ITEM_CRC_FUNCTION, item_crc

__all__ = ["THREAD_METADATA_SCHEMA_VERSION", "SqliteThreadMetadata", "ThreadMetadata"]

THREAD_METADATA_SCHEMA_VERSION = 3
"""The version of the thread metadata table this code writes and reads."""

_SCHEMA = Schema(
    key="thread_metadata",
    version=THREAD_METADATA_SCHEMA_VERSION,
    ddl=(
        """CREATE TABLE thread_metadata (
        thread_id  TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        crc        INTEGER NOT NULL,
        metadata   TEXT NOT NULL,
        ttl        REAL,
        ttl_strategy TEXT
    )""",
    ),
    upgrades={
        1: ("ALTER TABLE thread_metadata ADD COLUMN ttl REAL",),
        2: ("ALTER TABLE thread_metadata ADD COLUMN ttl_strategy TEXT",),
    },
)

_ERRORS = Errors(
    failed=CheckpointError,
    corrupt=CheckpointCorrupt,
    mismatch=CheckpointCorrupt,
    lost=CheckpointFileLost,
    unavailable=CheckpointUnavailable,
)

# The checksum is the store items' (its namespace a fixed tag), computed in the
# statement: a metadata update keeps the row's created_at. The item's second time
# is the row's ttl, or its created_at when it has none (as every row of version 1
# was checksummed, so those read back unchanged after the upgrade).
# A row's ttl strategy, when it has one, is in its tag: ``thread_metadata:keep_latest``.
_TAG = "thread_metadata"
_CRC = (
    f"{ITEM_CRC_FUNCTION}(CAST(?5 AS BLOB), CAST(?1 AS BLOB), ?2,"
    " COALESCE(?4, ?2), CAST(?3 AS BLOB))"
)
_PUT = (
    "INSERT INTO thread_metadata (thread_id, created_at, crc, metadata, ttl, ttl_strategy)"
    f" VALUES (?1, ?2, {_CRC}, ?3, ?4, ?6)"
    " ON CONFLICT (thread_id) DO UPDATE SET metadata = excluded.metadata, ttl = excluded.ttl,"
    " ttl_strategy = excluded.ttl_strategy,"
    f" crc = {ITEM_CRC_FUNCTION}(CAST(?5 AS BLOB), CAST(thread_id AS BLOB),"
    " created_at, COALESCE(excluded.ttl, created_at), CAST(excluded.metadata AS BLOB))"
)
_SELECT = (
    "SELECT CAST(thread_id AS BLOB), created_at, crc, CAST(metadata AS BLOB), ttl,"
    " ttl_strategy FROM thread_metadata"
)
_STRATEGIES = ("delete", "keep_latest")


def _tag(strategy: str | None) -> str:
    return _TAG if strategy is None else f"{_TAG}:{strategy}"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadMetadata:
    """One thread's metadata, as read back.

    Attributes:
        thread_id: The thread's id (the checkpointer's).
        metadata: A fresh dict (the caller may keep or change it).
        created_at: When the thread's row was first put, seconds since the epoch.
        ttl: Seconds of idleness after which the server deletes the thread
            (None: never).
        ttl_strategy: What the server does then: ``delete`` it, or
            ``keep_latest`` (drop its history, keep its latest state).
    """

    thread_id: str
    metadata: dict[str, Any] = field(repr=False)
    created_at: float
    ttl: float | None = None
    ttl_strategy: Literal["delete", "keep_latest"] = "delete"


def _row(row: tuple[Any, ...], file: str, i: int) -> ThreadMetadata:
    raw_id, created_at, crc, raw_metadata, ttl, strategy = row
    try:
        thread_id = text(raw_id, what="its thread id")
        where = f"the metadata of thread {thread_id!r}"
    except ValueError as exc:
        raise CheckpointCorrupt(f"{file}: thread metadata row {i + 1}: {exc}") from None
    try:
        if not isinstance(created_at, int | float):
            raise ValueError("its time is not a number")
        if ttl is not None and not (isinstance(ttl, int | float) and 0 < ttl < math.inf):
            raise ValueError("its time to live is not a number of seconds")
        if strategy is not None and strategy not in _STRATEGIES[1:]:
            raise ValueError("its time to live's strategy is not one this code knows")
        second = created_at if ttl is None else ttl
        tag = _tag(strategy).encode()
        if crc != item_crc(tag, raw_id, created_at, second, raw_metadata):
            raise ValueError(
                "its checksum does not match its contents (changed outside deepactors:"
                " a damaged disk or file, or a hand edit)"
            )
        metadata = decode_object(text(raw_metadata, what="its metadata"))
    except (ValueError, RecursionError) as exc:
        raise CheckpointCorrupt(f"{file}: {where}: {exc}") from None
    return ThreadMetadata(
        thread_id=thread_id,
        metadata=metadata,
        created_at=float(created_at),
        ttl=None if ttl is None else float(ttl),
        ttl_strategy="keep_latest" if strategy == "keep_latest" else "delete",
    )


def _get(raw: sqlite3.Connection, file: str, thread_id: str) -> ThreadMetadata | None:
    rows = raw.execute(f"{_SELECT} WHERE thread_id = ?", (thread_id,)).fetchall()
    return _row(rows[0], file, 0) if rows else None


def _all(raw: sqlite3.Connection, file: str) -> list[ThreadMetadata]:
    rows = raw.execute(f"{_SELECT} ORDER BY thread_id").fetchall()
    return [_row(row, file, i) for i, row in enumerate(rows)]


@final
class SqliteThreadMetadata(SqliteBase):
    """Threads' protocol metadata in a SQLite file, beside their checkpoints.

    What the server (``deepactors.server``) keeps of each thread besides its
    state: its metadata (its owner among it) and when it was made, so that a
    restarted server knows its threads as they were. Same connection handling
    as :class:`SqliteCheckpointer` (and it shares its file); each call is one
    statement in autocommit.

    Args:
        path: The database file (the checkpointer's).

    Raises:
        CheckpointCorrupt: On first use, when the file is not SQLite or is
            damaged; on a read, when a row does not read back as it was put.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._db = Database(path, schema=_SCHEMA, errors=_ERRORS)

    async def put(
        self,
        thread_id: str,
        metadata: dict[str, Any],
        *,
        created_at: float,
        ttl: float | None = None,
        ttl_strategy: Literal["delete", "keep_latest"] = "delete",
    ) -> None:
        """Create or replace a thread's metadata and time to live (``created_at`` is
        kept from the first put).

        Raises:
            TypeError: ``metadata`` is not a JSON-compatible dict.
            ValueError: A string in it would not read back the same, or ``ttl`` is
                not a finite number of seconds above 0.
        """
        check_thread_id(thread_id)
        if ttl is not None and not 0 < ttl < math.inf:
            raise ValueError(f"ttl: seconds above 0, not {ttl!r}")
        if ttl_strategy not in _STRATEGIES:
            raise ValueError(f"ttl_strategy: one of {_STRATEGIES}, not {ttl_strategy!r}")
        what = f"the metadata of thread {thread_id!r}"
        encoded = encode_object(metadata, what=what, finite=True)  # served to clients as JSON
        await self._db.run(
            # A float, as the REAL column gives it back: the checksum's input.
            functools.partial(
                _put,
                thread_id=thread_id,
                created_at=float(created_at),
                text=encoded,
                ttl=None if ttl is None else float(ttl),
                strategy=None if ttl_strategy == "delete" else ttl_strategy,
            )
        )

    async def get(self, thread_id: str) -> ThreadMetadata | None:
        """A thread's metadata, or None if none was put."""
        check_thread_id(thread_id)
        return await self._db.run(functools.partial(_get, file=self._db.file, thread_id=thread_id))

    async def all(self) -> list[ThreadMetadata]:
        """Every thread's metadata, by thread id."""
        return await self._db.run(functools.partial(_all, file=self._db.file))

    async def delete(self, thread_id: str) -> None:
        """Forget a thread's metadata (nothing happens when there is none)."""
        check_thread_id(thread_id)
        await self._db.run(functools.partial(_delete, thread_id=thread_id))


def _put(
    raw: sqlite3.Connection,
    *,
    thread_id: str,
    created_at: float,
    text: str,
    ttl: float | None,
    strategy: str | None,
) -> None:
    raw.execute(_PUT, (thread_id, created_at, text, ttl, _tag(strategy), strategy))


def _delete(raw: sqlite3.Connection, *, thread_id: str) -> None:
    raw.execute("DELETE FROM thread_metadata WHERE thread_id = ?", (thread_id,))

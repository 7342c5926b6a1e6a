"""SQLite persistence on either event loop: ``SqliteCheckpointer`` and ``SqliteStore``.

How the connection follows the event loop
-----------------------------------------
aiosqlite only works on asyncio, so a :class:`_Database` opens, lazily on first
use, the connection that fits the loop running at that moment:

- **asyncio**: an aiosqlite connection (its own thread, its own queue).
- **trio**: a plain ``sqlite3`` connection used from anyio worker threads through
  a ``CapacityLimiter(1)``, so exactly one thread touches it at a time (which
  is what makes ``check_same_thread=False`` safe).

Either way every operation is *one* function run in that thread (a whole
transaction, with its JSON decoding), so a ``put`` costs one thread hop and no
other task's statement can interleave with it.

A connection belongs to the event-loop *run* that opened it (asyncio loop or trio
run, told apart by ``sniffio`` and the loop's identity), and a ``_Database``
keeps one per live run, so one checkpointer can serve several threads at once,
each running its own loop (the sync ``invoke`` called from a threaded web
server). Their writes to the one file are ordinary cross-connection SQLite
writes: WAL lets readers run beside the writer, writers take turns on the write
lock (waiting up to ``_BUSY_TIMEOUT``), and ``seq`` numbers are taken under that
lock (see ``_put_records``), so they stay unique and gap-free.

When a run ends, a run-scoped system task closes its connection cleanly: trio
cancels system tasks when its main task returns, and ``asyncio.run`` (and
anyio's runner) cancels leftover tasks before closing the loop. So ``anyio.run``
once per call, as the sync wrapper does, opens and closes one connection per
call, and a later call, on the same loop type or the other one, simply opens a
new one. If a run ended without that cleanup (a loop closed without cancelling
its tasks), the next run to open a connection closes the stale one; a connection
is only ever closed by its own run or once its run is over, never under another
live run. Every ``put`` has committed before it returns, so nothing is lost at
these boundaries.

``aclose()`` closes the current run's connection now; it is idempotent, and a
later call reopens, which is what lets one checkpointer object serve several runs.
"""

from __future__ import annotations

import builtins
import functools
import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import sniffio

# Imported now, not lazily on first use: that import would take the import lock on
# the event loop, racing other threads' loops.
from anyio import Path as AsyncPath

from ..errors import CheckpointCorrupt, CheckpointError, CheckpointSchemaMismatch
from . import _aiosqlite
from ._checkpoint import (
    CheckpointRecord,
    CheckpointWrite,
    EncodedWrite,
    ThreadInfo,
    check_thread_id,
    encode_writes,
)
from ._json import check_text, decode_object
from .store import (
    Namespace,
    StoreItem,
    check_key,
    check_namespace,
    check_namespace_prefix,
    encode_value,
)

__all__ = ["CHECKPOINT_SCHEMA_VERSION", "STORE_SCHEMA_VERSION", "SqliteCheckpointer", "SqliteStore"]

T = TypeVar("T")

CHECKPOINT_SCHEMA_VERSION = 1
"""The version of the checkpoint tables this code writes and reads."""

STORE_SCHEMA_VERSION = 1
"""The version of the store table this code writes and reads."""

# How long a connection waits for another connection's write lock (another
# thread's run, another process) before failing with "database is locked". A
# put holds the lock for one insert and commit, so this is ample.
_BUSY_TIMEOUT = 5.0

# SQLite's primary result codes: "locked by another connection", and the two
# that mean "this file is not (or no longer) a database"; everything else
# (read-only, disk full...) is not corruption.
_SQLITE_BUSY = 5
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


class _Connection(Protocol):
    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...
    async def aclose(self) -> None: ...
    async def aclose_stale(self) -> None: ...


class _ThreadConnection:
    """A ``sqlite3`` connection driven from anyio worker threads, one at a time."""

    def __init__(self, raw: sqlite3.Connection, limiter: anyio.CapacityLimiter) -> None:
        self._raw = raw
        self._limiter = limiter
        self._closed = False

    @classmethod
    async def open(
        cls, path: str, prepare: Callable[[sqlite3.Connection], None]
    ) -> _ThreadConnection:
        def connect() -> sqlite3.Connection:
            raw = sqlite3.connect(
                path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
            try:
                prepare(raw)
            except BaseException:
                raw.close()
                raise
            return raw

        # Created inside the run: anyio's primitives bind to the loop that first uses them.
        limiter = anyio.CapacityLimiter(1)
        raw = await anyio.to_thread.run_sync(connect, limiter=limiter)
        return cls(raw, limiter)

    def _guarded(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # An operation that waited for the limiter while the connection was closed
        # has done nothing yet: the caller retries it on a new connection.
        if self._closed:
            raise _aiosqlite.ConnectionClosed
        return fn(self._raw)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # Not abandoned on cancel (anyio's default): the transaction finishes in
        # the thread and the caller is cancelled at its next checkpoint.
        return await anyio.to_thread.run_sync(self._guarded, fn, limiter=self._limiter)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._raw.close, limiter=self._limiter)

    async def aclose_stale(self) -> None:
        # The limiter belongs to the ended run; nothing else can use the
        # connection any more, so no limiter is needed.
        if self._closed:
            return
        self._closed = True
        await anyio.to_thread.run_sync(self._raw.close)


_Token = tuple[str, object]
"""An event-loop run: the library's name and the asyncio loop or trio token."""


def _loop_token() -> _Token:
    """Which event-loop run we are in: the library name and the loop's identity."""
    library = sniffio.current_async_library()
    if library == "asyncio":
        return library, _aiosqlite.running_loop()
    if library == "trio":
        import trio.lowlevel

        return library, trio.lowlevel.current_trio_token()
    raise CheckpointError(f"SQLite persistence runs on asyncio or trio, not on {library}")


def _set_wal(raw: sqlite3.Connection) -> None:
    # Switching a new file to WAL can fail with SQLITE_BUSY without going through
    # the busy handler, when another connection (another thread's run, another
    # process) is creating the same file at that moment: wait here, in the
    # connection's thread, as the busy handler would have.
    deadline = time.monotonic() + _BUSY_TIMEOUT
    while True:
        try:
            raw.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def _prepare(
    raw: sqlite3.Connection, *, file: str, key: str, version: int, ddl: Sequence[str]
) -> None:
    """Set the pragmas, then create or check this component's schema."""
    # WAL: readers never block the writer, and a commit is one append to the log.
    # synchronous=NORMAL: no fsync per commit; a committed step survives a
    # process crash (the SIGKILL), only an OS crash may lose the last ones.
    _set_wal(raw)
    raw.execute("PRAGMA synchronous=NORMAL")
    raw.execute("BEGIN IMMEDIATE")
    try:
        raw.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = raw.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            for statement in ddl:
                raw.execute(statement)
            raw.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, str(version)))
        elif row[0] != str(version):
            raise CheckpointSchemaMismatch(
                f"{file}: its {key} schema is version {row[0]}, "
                f"but this version of deepactors reads and writes version {version}"
            )
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def _translate(exc: sqlite3.Error, file: str) -> CheckpointError:
    # Extended result codes keep the primary code in their low byte.
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return CheckpointCorrupt(f"{file} is not a SQLite database, or it is damaged: {exc}")
    return CheckpointError(f"{file}: {exc}")


@dataclass(slots=True, kw_only=True)
class _Slot:
    """One event-loop run's connection: opening while ``conn`` is None."""

    opening: anyio.Event
    conn: _Connection | None = None
    closed: anyio.Event | None = None  # set by aclose(), to retire the closer task


def _run_is_over(token: _Token) -> bool:
    """Whether the event-loop run behind ``token`` has ended (safe from any thread)."""
    library, loop = token
    if library == "asyncio":
        return _aiosqlite.loop_is_closed(loop)
    import trio
    import trio.lowlevel

    assert isinstance(loop, trio.lowlevel.TrioToken)
    try:
        # Thread-safe, and refused exactly when the run has finished.
        loop.run_sync_soon(_nothing)
    except trio.RunFinishedError:
        return True
    return False


def _nothing() -> None:
    pass


class _Database:
    """The lazily opened, loop-adaptive connections to one file (see the module docstring)."""

    def __init__(
        self, path: str | os.PathLike[str], *, key: str, version: int, ddl: Sequence[str]
    ) -> None:
        self.file = os.fspath(path)
        self._prepare = functools.partial(
            _prepare, file=self.file, key=key, version=version, ddl=tuple(ddl)
        )
        # One slot per live event-loop run. Each run adds, reads and removes only
        # its own slot (all of its tasks are on its one thread); only a slot whose
        # run is over may be removed from another thread. Shared between threads,
        # the dict is touched only through single operations (get, setdefault,
        # pop, copy), each atomic in CPython, with or without the GIL: no lock,
        # which would be a blocking call on the event loop.
        self._slots: dict[_Token, _Slot] = {}

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` in the connection's thread, opening it if needed.

        Raises:
            CheckpointCorrupt: The file is not a database or is damaged.
            CheckpointError: Any other SQLite failure.
        """
        while True:
            conn = await self._connection()
            try:
                return await conn.run(fn)
            except _aiosqlite.ConnectionClosed:
                continue  # closed under us before it started: reopen and retry
            except sqlite3.Error as exc:
                raise _translate(exc, self.file) from exc

    async def _connection(self) -> _Connection:
        token = _loop_token()
        while True:
            slot = self._slots.get(token)
            if slot is None:
                slot = _Slot(opening=anyio.Event())
                self._slots[token] = slot
                break
            if slot.conn is not None:
                return slot.conn
            # Another task of this run is opening it: wait, then look again.
            await slot.opening.wait()
        try:
            await self._release_gone()
            try:
                conn = await self._open(token[0])
            except sqlite3.Error as exc:
                raise _translate(exc, self.file) from exc
            slot.conn, slot.closed = conn, anyio.Event()
            self._spawn_closer(token, conn, slot.closed)
            return conn
        except BaseException:
            self._forget(token, slot)
            raise
        finally:
            slot.opening.set()

    def _forget(self, token: _Token, slot: _Slot) -> bool:
        """Remove ``slot`` if it is still the one of ``token``; say whether it was."""
        if self._slots.get(token) is not slot:
            return False
        # Only this run removes its live slot, so nothing can slip in between.
        return self._slots.pop(token, None) is slot

    async def _open(self, library: str) -> _Connection:
        if self.file != ":memory:" and not self.file.startswith("file:"):
            await AsyncPath(self.file).parent.mkdir(parents=True, exist_ok=True)
        if library == "asyncio":
            return await _aiosqlite.AiosqliteConnection.open(
                self.file, self._prepare, timeout=_BUSY_TIMEOUT
            )
        return await _ThreadConnection.open(self.file, self._prepare)

    def _spawn_closer(self, token: _Token, conn: _Connection, closed: anyio.Event) -> None:
        async def close_at_run_end() -> None:
            try:
                await closed.wait()
            finally:
                # Cancelled when the run ends; trio keeps cancelling, so shield.
                with anyio.CancelScope(shield=True):
                    slot = self._slots.get(token)
                    if slot is not None and slot.conn is conn:
                        self._forget(token, slot)
                    await conn.aclose()

        if token[0] == "asyncio":
            _aiosqlite.spawn_system_task(close_at_run_end)
        else:
            import trio.lowlevel

            trio.lowlevel.spawn_system_task(close_at_run_end)

    async def _release_gone(self) -> None:
        """Close the connections of runs that ended without closing them.

        Only those: another thread's run may be using its connection right now.
        """
        gone: list[_Connection] = []
        for token, slot in self._slots.copy().items():
            # pop claims the slot: two threads sweeping at once close it only once.
            if slot.conn is None or not _run_is_over(token):
                continue
            if self._slots.pop(token, None) is slot:
                gone.append(slot.conn)
        with anyio.CancelScope(shield=True):
            for conn in gone:
                await conn.aclose_stale()

    async def aclose(self) -> None:
        """Close this run's connection, if open, and any left by ended runs.

        Connections of other live runs (other threads) stay open. A later
        :meth:`run` reopens.
        """
        try:
            token: _Token | None = _loop_token()
        except CheckpointError:
            token = None
        slot = None if token is None else self._slots.get(token)
        if token is not None and slot is not None and slot.conn is not None:
            self._forget(token, slot)
            await slot.conn.aclose()  # idempotent, as is retiring the closer
            assert slot.closed is not None
            slot.closed.set()
        await self._release_gone()
        await anyio.lowlevel.checkpoint()


class _SqliteBase:
    _db: _Database

    @property
    def path(self) -> str:
        """The database file."""
        return self._db.file

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db.file!r})"

    async def aclose(self) -> None:
        """Close the connection now (idempotent).

        Not final: a later call opens a new connection. The connection is also
        closed by itself when the event-loop run that opened it ends.
        """
        await self._db.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# --- checkpoints -----------------------------------------------------------------

# A rowid table, not WITHOUT ROWID: records are 1-2 KB, and SQLite advises
# WITHOUT ROWID only for rows much smaller than a page. ``data`` comes last so
# that listing threads never reads it.
_CHECKPOINT_DDL = (
    """CREATE TABLE checkpoint_records (
        thread_id  TEXT    NOT NULL,
        seq        INTEGER NOT NULL,
        path       TEXT    NOT NULL,
        step       INTEGER NOT NULL,
        kind       TEXT    NOT NULL,
        created_at REAL    NOT NULL,
        data       TEXT    NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )""",
)

_INSERT_RECORD = (
    "INSERT INTO checkpoint_records (thread_id, seq, path, step, kind, created_at, data)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)

_INSERT_NEXT = (
    "INSERT INTO checkpoint_records (thread_id, seq, path, step, kind, created_at, data)"
    " VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM checkpoint_records"
    " WHERE thread_id = ?), ?, ?, ?, ?, ?)"
)


def _put_records(
    raw: sqlite3.Connection, thread_id: str, rows: list[EncodedWrite], now: float
) -> None:
    if len(rows) == 1:
        # The common case, one record per step: a single statement in autocommit
        # is its own transaction, numbering included, so no BEGIN/COMMIT round.
        path, step, kind, text = rows[0]
        raw.execute(_INSERT_NEXT, (thread_id, thread_id, path, step, kind, now, text))
        return
    # IMMEDIATE takes the write lock before reading the last seq, so another
    # process writing the same file cannot get the same numbers.
    raw.execute("BEGIN IMMEDIATE")
    try:
        (last,) = raw.execute(
            "SELECT coalesce(max(seq), 0) FROM checkpoint_records WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        raw.executemany(
            _INSERT_RECORD,
            [
                (thread_id, last + i, path, step, kind, now, text)
                for i, (path, step, kind, text) in enumerate(rows, 1)
            ],
        )
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def _read_records(
    raw: sqlite3.Connection,
    file: str,
    thread_id: str,
    path: str | None,
    upto_seq: int | None,
) -> list[CheckpointRecord]:
    sql = (
        "SELECT seq, path, step, kind, created_at, data FROM checkpoint_records WHERE thread_id = ?"
    )
    params: list[Any] = [thread_id]
    if path is not None:
        sql += " AND path = ?"
        params.append(path)
    if upto_seq is not None:
        sql += " AND seq <= ?"
        params.append(upto_seq)
    sql += " ORDER BY seq"
    out: list[CheckpointRecord] = []
    # Decoded here, in the connection's thread, so a long thread does not stall
    # the event loop.
    for seq, rpath, step, kind, created_at, text in raw.execute(sql, params):
        try:
            data = decode_object(text)
        except ValueError as exc:
            raise CheckpointCorrupt(
                f"{file}: thread {thread_id!r}, record seq {seq}: "
                f"its data is not a JSON object ({exc})"
            ) from exc
        out.append(
            CheckpointRecord(
                thread_id=thread_id,
                seq=seq,
                path=rpath,
                step=step,
                kind=kind,
                data=data,
                created_at=created_at,
            )
        )
    return out


def _list_threads(raw: sqlite3.Connection) -> list[ThreadInfo]:
    # Counting walks the primary-key index only; one lookup per thread fetches
    # the newest record's time.
    rows = raw.execute(
        "SELECT t.thread_id, t.n, t.last, r.created_at FROM"
        " (SELECT thread_id, count(*) AS n, max(seq) AS last"
        "  FROM checkpoint_records GROUP BY thread_id) AS t"
        " JOIN checkpoint_records AS r ON r.thread_id = t.thread_id AND r.seq = t.last"
        " ORDER BY t.thread_id"
    ).fetchall()
    return [
        ThreadInfo(thread_id=tid, records=n, last_seq=last, updated_at=at)
        for tid, n, last, at in rows
    ]


def _delete_thread(raw: sqlite3.Connection, thread_id: str) -> None:
    raw.execute("DELETE FROM checkpoint_records WHERE thread_id = ?", (thread_id,))


class SqliteCheckpointer(_SqliteBase):
    """A :class:`~deepactors.persistence.Checkpointer` in a SQLite file.

    Records are rows of ``checkpoint_records`` holding their data as compact JSON
    text, in WAL mode with ``synchronous=NORMAL``: each ``put`` is one
    transaction and one commit, durable against a crash of the process.

    The connection opens on first use in the running event loop (aiosqlite on
    asyncio, ``sqlite3`` in worker threads on trio) and closes by itself when
    that event-loop run ends; see the module docstring of
    ``deepactors.persistence._sqlite``. Parent folders of ``path`` are created.

    Args:
        path: The database file. It may be shared with a :class:`SqliteStore`.

    Raises:
        CheckpointCorrupt: On first use, when the file is not SQLite or is damaged.
        CheckpointSchemaMismatch: On first use, when the file holds checkpoints of
            another schema version.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._db = _Database(
            path, key="checkpoints", version=CHECKPOINT_SCHEMA_VERSION, ddl=_CHECKPOINT_DDL
        )

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Checkpointer.put`."""
        check_thread_id(thread_id)
        rows = encode_writes(records)
        if not rows:
            await anyio.lowlevel.checkpoint()
            return
        await self._db.run(
            functools.partial(_put_records, thread_id=thread_id, rows=rows, now=time.time())
        )

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        """See :meth:`Checkpointer.read`."""
        check_text(thread_id, what="thread_id")
        if path is not None:
            check_text(path, what="a record's path")
        return await self._db.run(
            functools.partial(
                _read_records,
                file=self._db.file,
                thread_id=thread_id,
                path=path,
                upto_seq=upto_seq,
            )
        )

    async def threads(self) -> list[ThreadInfo]:
        """See :meth:`Checkpointer.threads`."""
        return await self._db.run(_list_threads)

    async def delete_thread(self, thread_id: str) -> None:
        """See :meth:`Checkpointer.delete_thread`."""
        check_text(thread_id, what="thread_id")
        await self._db.run(functools.partial(_delete_thread, thread_id=thread_id))


# --- store -----------------------------------------------------------------------

# A namespace is stored as its JSON array text: exact-match for ``list``, and for
# ``search`` a prefix ("a" then "b" is '["a","b"]', which starts with '["a",').
_STORE_DDL = (
    """CREATE TABLE store_items (
        namespace  TEXT NOT NULL,
        key        TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        value      TEXT NOT NULL,
        PRIMARY KEY (namespace, key)
    )""",
)


# The namespace column's text; the format is on disk, do not change it.
_encode_namespace = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _ns_text(namespace: Namespace) -> str:
    return _encode_namespace(list(namespace))


def _items(file: str, rows: list[Any]) -> list[StoreItem]:
    out: list[StoreItem] = []
    for ns, key, created_at, updated_at, text in rows:
        try:
            value = decode_object(text)
            namespace = tuple(json.loads(ns))
        except ValueError as exc:
            raise CheckpointCorrupt(
                f"{file}: store item {ns} {key!r} cannot be decoded ({exc})"
            ) from exc
        out.append(
            StoreItem(
                namespace=namespace,
                key=key,
                value=value,
                created_at=created_at,
                updated_at=updated_at,
            )
        )
    return out


_ITEM_COLUMNS = "namespace, key, created_at, updated_at, value"


def _store_get(raw: sqlite3.Connection, file: str, ns: str, key: str) -> StoreItem | None:
    rows = raw.execute(
        f"SELECT {_ITEM_COLUMNS} FROM store_items WHERE namespace = ? AND key = ?", (ns, key)
    ).fetchall()
    items = _items(file, rows)
    return items[0] if items else None


def _store_put(raw: sqlite3.Connection, ns: str, key: str, text: str, now: float) -> None:
    raw.execute(
        f"INSERT INTO store_items ({_ITEM_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (namespace, key) DO UPDATE"
        " SET value = excluded.value, updated_at = excluded.updated_at",
        (ns, key, now, now, text),
    )


def _store_delete(raw: sqlite3.Connection, ns: str, key: str) -> None:
    raw.execute("DELETE FROM store_items WHERE namespace = ? AND key = ?", (ns, key))


def _store_list(raw: sqlite3.Connection, file: str, ns: str, prefix: str) -> list[StoreItem]:
    # substr counts characters, as Python's len does: an exact prefix test.
    rows = raw.execute(
        f"SELECT {_ITEM_COLUMNS} FROM store_items"
        " WHERE namespace = ? AND substr(key, 1, ?) = ? ORDER BY key",
        (ns, len(prefix), prefix),
    ).fetchall()
    return _items(file, rows)


def _store_search(
    raw: sqlite3.Connection, file: str, ns_prefix: Namespace, key_prefix: str
) -> list[StoreItem]:
    sql = f"SELECT {_ITEM_COLUMNS} FROM store_items WHERE substr(key, 1, ?) = ?"
    params: list[Any] = [len(key_prefix), key_prefix]
    if ns_prefix:
        exact = _ns_text(ns_prefix)
        below = exact[:-1] + ","  # '["a"' + ',' starts every namespace under ("a",)
        # The range [below, below with ',' bumped to '-') holds exactly the texts
        # that start with ``below``, and it can use the primary-key index.
        sql += " AND (namespace = ? OR (namespace >= ? AND namespace < ?))"
        params += [exact, below, below[:-1] + "-"]
    items = _items(file, raw.execute(sql, params).fetchall())
    # Sorted here: JSON text order is not tuple order (escapes, separators).
    items.sort(key=lambda item: (item.namespace, item.key))
    return items


class SqliteStore(_SqliteBase):
    """A :class:`~deepactors.persistence.Store` in a SQLite file.

    Same connection handling as :class:`SqliteCheckpointer` (and it may share
    its file); each call is one statement in autocommit.

    Args:
        path: The database file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._db = _Database(path, key="store", version=STORE_SCHEMA_VERSION, ddl=_STORE_DDL)

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        ns = _ns_text(check_namespace(namespace))
        check_key(key)
        return await self._db.run(functools.partial(_store_get, file=self._db.file, ns=ns, key=key))

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """See :meth:`Store.put`."""
        ns = _ns_text(check_namespace(namespace))
        text = encode_value(check_key(key), value)
        await self._db.run(
            functools.partial(_store_put, ns=ns, key=key, text=text, now=time.time())
        )

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        ns = _ns_text(check_namespace(namespace))
        check_key(key)
        await self._db.run(functools.partial(_store_delete, ns=ns, key=key))

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list`."""
        ns = _ns_text(check_namespace(namespace))
        check_key(prefix, what="a key prefix")
        return await self._db.run(
            functools.partial(_store_list, file=self._db.file, ns=ns, prefix=prefix)
        )

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search`."""
        ns_prefix = check_namespace_prefix(namespace_prefix)
        check_key(key_prefix, what="a key prefix")
        return await self._db.run(
            functools.partial(
                _store_search,
                file=self._db.file,
                ns_prefix=ns_prefix,
                key_prefix=key_prefix,
            )
        )

"""SQLite connections on either event loop, for the checkpointer and the store.

How the connection follows the event loop
-----------------------------------------
aiosqlite only works on asyncio, so a :class:`Database` opens, lazily on first
use, the connection that fits the loop running at that moment:

- **asyncio**: an aiosqlite connection (its own thread, its own queue:
  :mod:`._aiosqlite`).
- **trio**: a plain ``sqlite3`` connection driven from one of a few threads the
  run's connections share, one operation at a time (which is what makes
  ``check_same_thread=False`` safe), so a run with hundreds of checkpointers
  still uses a bounded number of threads (:mod:`._threaded`).

Either way every operation is *one* function run in that thread (a whole
transaction, with its JSON decoding), so a ``put`` costs one thread hop and no
other task's statement can interleave with it.

A connection belongs to the event-loop *run* that opened it, and a ``Database``
keeps one per live run (a :class:`~deepactors._core.perloop.PerLoop`), so one
checkpointer can serve several threads at once, each running its own loop (the
sync ``invoke`` called from a threaded web server). Their writes to the one file
are ordinary cross-connection SQLite writes: WAL lets readers run beside the
writer, and writers take turns on the write lock (waiting up to
``BUSY_TIMEOUT``). When a run ends, the run closes its connection; a connection
left by a run that ended without that cleanup is closed by the next run to open
one. Every operation has committed before it returns, so nothing is lost at
these boundaries.

What goes wrong is reported as the component's own errors (:class:`Errors`):
a file that is not a database, or is damaged or truncated, is "corrupt" (even
when SQLite only says "database is locked", see ``_integrity.diagnose``); a
schema of another version is a mismatch; the file deleted or replaced while in use
(its device and inode are checked after every operation) is "lost"; anything else
is a plain failure naming the file.
"""

from __future__ import annotations

import functools
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, final

import anyio
import anyio.to_thread

# Imported now, not lazily on first use: that import would take the import lock on
# the event loop, racing other threads' loops.
from anyio import Path as AsyncPath
from anyio.abc import AsyncResource

from ..._core.loops import UnsupportedLoop, current_run
from ..._core.perloop import PerLoop
from ..._core.stamps import utc_stamp
from ...errors import ConfigurationError, DatabaseUnavailable, PersistenceError
from . import _aiosqlite
from ._integrity import diagnose, emptied, identity, register_crc

__all__ = ["BUSY_TIMEOUT", "Database", "Errors", "Schema", "SqliteBase", "text"]

T = TypeVar("T")

BUSY_TIMEOUT = 5.0
"""How long a connection waits for another connection's write lock (another
thread's run, another process) before failing with "database is locked", unless
the checkpointer or store is given ``busy_timeout=``. A put holds the lock for one
insert and commit, so this is ample."""

# SQLite's primary result codes: "locked by another connection", and the two
# that mean "this file is not (or no longer) a database"; everything else
# (read-only, disk full...) is not corruption.
_SQLITE_BUSY = 5
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Errors:
    """The exceptions one component raises: a failure, corruption, a schema mismatch,
    its file deleted or replaced while in use, and its file locked by another
    writer for longer than :data:`BUSY_TIMEOUT`."""

    failed: type[PersistenceError]
    corrupt: type[PersistenceError]
    mismatch: type[PersistenceError]
    lost: type[PersistenceError]
    unavailable: type[DatabaseUnavailable] = DatabaseUnavailable


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Schema:
    """One component's tables, versioned by its own row in the ``meta`` table.

    Attributes:
        key: Its row in ``meta`` (``"checkpoints"``, ``"store"``).
        version: The version this code reads and writes.
        ddl: Creates the current version in a file that has none of it.
        upgrades: For an older version ``v``, the statements that bring it to
            ``v + 1``; a file of a version with no path up is a mismatch.
    """

    key: str
    version: int
    ddl: Sequence[str]
    upgrades: Mapping[int, Sequence[str]] = field(default_factory=dict)


def text(value: object, *, what: str) -> str:
    """A text column read as ``CAST(column AS BLOB)``, decoded strictly.

    Reading through a cast keeps sqlite3 from decoding it: its error for a
    column that is not UTF-8 quotes the stored bytes.

    Raises:
        ValueError: Not UTF-8 (the message says ``what``, not the bytes).
    """
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise ValueError(f"{what} is not valid UTF-8 text") from None
    raise ValueError(f"{what} is missing")


def _translate(
    exc: sqlite3.Error, file: str, errors: Errors, busy_timeout: float
) -> PersistenceError:
    # Extended result codes keep the primary code in their low byte.
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return errors.corrupt(f"{file} is not a SQLite database, or it is damaged: {exc}")
    if code == _SQLITE_BUSY:
        damage = diagnose(file)
        if damage is not None:
            return errors.corrupt(f"{file} is not a SQLite database, or it is damaged: {damage}")
        # Another writer held the file all along: nothing was written, and the
        # same call may succeed once it lets go.
        since = time.time() - busy_timeout
        when = utc_stamp(since)
        return errors.unavailable(
            f"{file} is locked by another writer since {when}"
            f" (more than {busy_timeout:g} s): {exc}",
            location=file,
            since=since,
        )
    return errors.failed(f"{file}: {exc}")


def _set_wal(raw: sqlite3.Connection, file: str, errors: Errors, busy_timeout: float) -> None:
    # Switching a new file to WAL can fail with SQLITE_BUSY without going through
    # the busy handler, when another connection (another thread's run, another
    # process) is creating the same file at that moment: wait here, in the
    # connection's thread, as the busy handler would have. A damaged file looks
    # the same, for ever: tell them apart before waiting.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            raw.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
            damage = diagnose(file)
            if damage is not None:
                raise errors.corrupt(
                    f"{file} is not a SQLite database, or it is damaged: {damage}"
                ) from exc
        time.sleep(0.01)


def _prepare(
    raw: sqlite3.Connection, *, file: str, schema: Schema, errors: Errors, busy_timeout: float
) -> None:
    """Set the pragmas, then create, upgrade or check the component's schema."""
    # WAL: readers never block the writer, and a commit is one append to the log.
    # synchronous=NORMAL: no fsync per commit; a committed step survives a
    # process crash (SIGKILL), only an OS crash may lose the last ones.
    if file != ":memory:" and not file.startswith("file:"):
        # Before the first statement, which would delete the evidence.
        damage = emptied(file)
        if damage is not None:
            raise errors.corrupt(f"{file} is not a SQLite database, or it is damaged: {damage}")
    _set_wal(raw, file, errors, busy_timeout)
    raw.execute("PRAGMA synchronous=NORMAL")
    register_crc(raw)
    raw.execute("BEGIN IMMEDIATE")
    try:
        raw.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = raw.execute("SELECT value FROM meta WHERE key = ?", (schema.key,)).fetchone()
        if row is None:
            for statement in schema.ddl:
                raw.execute(statement)
            raw.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)", (schema.key, str(schema.version))
            )
        elif row[0] != str(schema.version):
            found = int(row[0]) if str(row[0]).isdigit() else None
            steps = range(found or 0, schema.version)
            if found is None or not steps or any(v not in schema.upgrades for v in steps):
                raise errors.mismatch(
                    f"{file}: its {schema.key} schema is version {row[0]}, "
                    f"but this version of deepactors reads and writes version {schema.version}"
                )
            for version in steps:
                for statement in schema.upgrades[version]:
                    raw.execute(statement)
            raw.execute(
                "UPDATE meta SET value = ? WHERE key = ?", (str(schema.version), schema.key)
            )
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


class _Connection(Protocol):
    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...
    async def aclose(self) -> None: ...
    async def aclose_stale(self) -> None: ...


async def _close(conn: _Connection) -> None:
    await conn.aclose()


async def _close_stale(conn: _Connection) -> None:
    await conn.aclose_stale()


@final
class Database:
    """The lazily opened, loop-adaptive connections to one file (see the module docstring).

    Args:
        path: The file.
        schema: The component's tables.
        errors: The component's exceptions.
        busy_timeout: Seconds a connection waits for another's write lock
            (:data:`BUSY_TIMEOUT` by default).

    Raises:
        ConfigurationError: ``busy_timeout`` is not a number of seconds above 0.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        schema: Schema,
        errors: Errors,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        if not 0 < busy_timeout < math.inf:  # NaN too
            raise ConfigurationError(
                f"busy_timeout must be a positive number of seconds, not {busy_timeout!r}"
            )
        self.file = os.fspath(path)
        self.errors = errors
        self.busy_timeout = float(busy_timeout)
        # The (st_dev, st_ino) of the file first opened: the object stays bound
        # to it, across connections and event-loop runs (see ``_check_identity``).
        self._identity: tuple[int, int] | None = None
        self._identity_lock = threading.Lock()
        self._checks_identity = self.file not in ("", ":memory:") and not self.file.startswith(
            "file:"
        )
        self._prepare = functools.partial(
            _prepare, file=self.file, schema=schema, errors=errors, busy_timeout=self.busy_timeout
        )
        self._connections: PerLoop[_Connection] = PerLoop(
            self._open, _close, close_stale=_close_stale
        )

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` in the connection's thread, opening it if needed.

        ``fn`` may raise the component's own errors; SQLite's are translated (in
        the thread, where the file may be looked at).

        Raises:
            PersistenceError: Of the component's kinds (see :class:`Errors`).
        """
        call = functools.partial(self._translated, fn)
        while True:
            try:
                # Open already, but for a run's first call: no await to find it.
                conn = self._connections.ready() or await self._connections.get()
            except UnsupportedLoop as exc:
                raise self.errors.failed(f"{self.file}: SQLite persistence: {exc}") from None
            try:
                return await conn.run(call)
            except _aiosqlite.ConnectionClosed:
                continue  # closed under us before it started: reopen and retry

    def _translated(self, fn: Callable[[sqlite3.Connection], T], raw: sqlite3.Connection) -> T:
        try:
            result = fn(raw)
        except sqlite3.Error as exc:
            lost = self._check_identity()
            raise (lost or _translate(exc, self.file, self.errors, self.busy_timeout)) from exc
        except UnicodeDecodeError as exc:
            # Text SQLite handed back is not UTF-8: its error message quoting a
            # damaged schema (the sqlite3 module decodes it and fails), or a
            # damaged value. Either way the file's bytes were changed.
            lost = self._check_identity()
            raise (
                lost
                or self.errors.corrupt(
                    f"{self.file} is not a SQLite database, or it is damaged: it holds "
                    f"text that is not UTF-8 ({exc.reason})"
                )
            ) from exc
        # After the operation, not before: a commit that went to a file no longer
        # at the path is then reported, not returned as stored. One stat per
        # operation (a whole transaction), in the connection's thread.
        lost = self._check_identity()
        if lost is not None:
            raise lost
        return result

    def _check_identity(self) -> PersistenceError | None:
        """The error to raise if the file at the path is not the one first opened.

        A deleted file stays open, and SQLite goes on committing to it; a file
        renamed over ours is not seen by a connection already open. Neither
        says anything, and what is written goes where nobody will read it.
        """
        if not self._checks_identity:
            return None
        try:
            now = identity(self.file)
        except OSError as exc:
            return self.errors.failed(f"{self.file}: cannot look at the file: {exc}")
        if now is None:
            return self.errors.lost(
                f"{self.file} was deleted while in use: what was written after that is lost,"
                " and nothing more is written to it"
            )
        with self._identity_lock:
            if self._identity is None:
                self._identity = now  # the first connection's first operation: its prepare
            first = self._identity
        if now != first:
            return self.errors.lost(
                f"{self.file} was replaced by another file while in use: what was written after"
                " that went to the file first opened, and is lost; nothing more is written"
            )
        return None

    async def _open(self) -> _Connection:
        if self.file != ":memory:" and not self.file.startswith("file:"):
            await AsyncPath(self.file).parent.mkdir(parents=True, exist_ok=True)
        prepare = functools.partial(self._translated, self._prepare)
        try:
            if current_run().library == "asyncio":
                return await _aiosqlite.AiosqliteConnection.open(
                    self.file, prepare, timeout=self.busy_timeout
                )
            from ._threaded import ThreadConnection  # imports trio: only on trio

            return await ThreadConnection.open(self.file, prepare, timeout=self.busy_timeout)
        except sqlite3.Error as exc:  # from connecting, before prepare
            error = await anyio.to_thread.run_sync(
                _translate, exc, self.file, self.errors, self.busy_timeout
            )
            raise error from exc

    async def aclose(self) -> None:
        """Close this run's connection, if open, and any left by ended runs.

        Connections of other live runs (other threads) stay open. A later
        :meth:`run` reopens.
        """
        await self._connections.aclose()


class SqliteBase(AsyncResource):
    """What the SQLite checkpointer and store share: a file, closing, ``async with``."""

    _db: Database

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

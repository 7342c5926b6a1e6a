"""Where crons are kept, and who fires each tick: in memory, in SQLite, in PostgreSQL.

A :class:`CronBook` keeps the crons and decides, for each firing, which server
process makes its run: :meth:`CronBook.claim` records ``(cron, tick)`` once, and
only the caller that recorded it fires. In memory that is this process alone; in
a SQLite file or a PostgreSQL database it holds for every process using it, so
several server processes on one database fire each tick exactly once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from ..._core.logs import get_logger
from ...errors import PersistenceError
from ...persistence.sqlite import Database, Errors, Schema
from ._model import Cron

__all__ = ["KEPT_FIRINGS", "CronBook", "MemoryCronBook", "SqliteCronBook", "rows_to_crons"]

_log = get_logger("deepactors.server")

KEPT_FIRINGS = 3600.0
"""Seconds a claimed firing is remembered: past it, no process can still be deciding it."""


class CronBook(Protocol):
    """The crons of a server, and the claims on their firings."""

    async def put(self, cron: Cron) -> None:
        """Add ``cron``, or replace the one with its id."""
        ...

    async def get(self, cron_id: str) -> Cron | None:
        """The cron with this id, if any."""
        ...

    async def delete(self, cron_id: str) -> bool:
        """Forget the cron (and its claims); whether there was one."""
        ...

    async def all(self) -> list[Cron]:
        """Every cron, oldest first."""
        ...

    async def claim(self, cron_id: str, tick: float) -> bool:
        """Record that the firing of ``cron_id`` at ``tick`` is being made; False
        if it already was (by this process or another)."""
        ...

    async def advance(self, cron_id: str, tick: float, next_run: float | None) -> None:
        """Set the cron's next firing after ``tick``, unless it was changed meanwhile."""
        ...

    async def aclose(self) -> None:
        """Let go of the database, if any."""
        ...


class MemoryCronBook:
    """Crons of one process, gone when it stops."""

    def __init__(self) -> None:
        self._crons: dict[str, Cron] = {}
        self._claims: dict[tuple[str, float], float] = {}

    async def put(self, cron: Cron) -> None:
        self._crons[cron.cron_id] = Cron.loads(cron.dumps())  # a copy: no aliasing

    async def get(self, cron_id: str) -> Cron | None:
        found = self._crons.get(cron_id)
        return None if found is None else Cron.loads(found.dumps())

    async def delete(self, cron_id: str) -> bool:
        return self._crons.pop(cron_id, None) is not None

    async def all(self) -> list[Cron]:
        return [Cron.loads(c.dumps()) for c in self._crons.values()]

    async def claim(self, cron_id: str, tick: float) -> bool:
        self._claims = {k: v for k, v in self._claims.items() if v > tick - KEPT_FIRINGS}
        if (cron_id, tick) in self._claims:
            return False
        self._claims[(cron_id, tick)] = tick
        return True

    async def advance(self, cron_id: str, tick: float, next_run: float | None) -> None:
        found = self._crons.get(cron_id)
        if found is not None and found.next_run == tick:
            found.next_run = next_run

    async def aclose(self) -> None:
        pass


_SQLITE = Schema(
    key="crons",
    version=1,
    ddl=(
        "CREATE TABLE crons (cron_id TEXT PRIMARY KEY, data TEXT NOT NULL,"
        " next_run REAL, created_at REAL NOT NULL)",
        "CREATE TABLE cron_firings (cron_id TEXT NOT NULL, tick REAL NOT NULL,"
        " PRIMARY KEY (cron_id, tick))",
    ),
)
# Crons have no errors of their own: what goes wrong is a PersistenceError naming the file.
_ERRORS = Errors(
    failed=PersistenceError,
    corrupt=PersistenceError,
    mismatch=PersistenceError,
    lost=PersistenceError,
)


def rows_to_crons(rows: Sequence[tuple[Any, ...]], where: str) -> list[Cron]:
    crons = []
    """The crons of ``rows`` of ``(cron_id, data)``; a damaged one is skipped, and logged."""
    for cron_id, data in rows:
        try:
            crons.append(Cron.loads(data))
        except (ValueError, TypeError) as exc:
            # One damaged row must not stop every other cron: it is skipped, and said.
            _log.error("cron unreadable, skipped", cron_id=cron_id, where=where, error=str(exc))
    return crons


class SqliteCronBook:
    """Crons in a SQLite file (``serve --db``'s), shared by the processes that use it.

    Args:
        path: The file (the threads' and the store's, when ``serve --db`` names one).
    """

    def __init__(self, path: str) -> None:
        self._db = Database(path, schema=_SQLITE, errors=_ERRORS)

    async def put(self, cron: Cron) -> None:
        def put(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute(
                    "INSERT INTO crons (cron_id, data, next_run, created_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (cron_id) DO UPDATE SET data = excluded.data,"
                    " next_run = excluded.next_run",
                    (cron.cron_id, cron.dumps(), cron.next_run, cron.created_at),
                )

        await self._db.run(put)

    async def get(self, cron_id: str) -> Cron | None:
        def get(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT cron_id, data FROM crons WHERE cron_id = ?", (cron_id,)
            ).fetchall()

        found = rows_to_crons(await self._db.run(get), self._db.file)
        return found[0] if found else None

    async def delete(self, cron_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("DELETE FROM cron_firings WHERE cron_id = ?", (cron_id,))
                return conn.execute("DELETE FROM crons WHERE cron_id = ?", (cron_id,)).rowcount > 0

        return await self._db.run(delete)

    async def all(self) -> list[Cron]:
        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute("SELECT cron_id, data FROM crons ORDER BY created_at").fetchall()

        return rows_to_crons(await self._db.run(read), self._db.file)

    async def claim(self, cron_id: str, tick: float) -> bool:
        def claim(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("DELETE FROM cron_firings WHERE tick < ?", (tick - KEPT_FIRINGS,))
                return (
                    conn.execute(
                        "INSERT INTO cron_firings (cron_id, tick) VALUES (?, ?)"
                        " ON CONFLICT DO NOTHING",
                        (cron_id, tick),
                    ).rowcount
                    == 1
                )

        return await self._db.run(claim)

    async def advance(self, cron_id: str, tick: float, next_run: float | None) -> None:
        def advance(conn: sqlite3.Connection) -> None:
            with conn:
                row = conn.execute(
                    "SELECT data FROM crons WHERE cron_id = ? AND next_run = ?", (cron_id, tick)
                ).fetchone()
                if row is None:
                    return  # changed (or deleted) meanwhile: that change stands
                data = json.loads(row[0])
                data["next_run"] = next_run
                conn.execute(
                    "UPDATE crons SET data = ?, next_run = ? WHERE cron_id = ?",
                    (json.dumps(data, separators=(",", ":")), next_run, cron_id),
                )

        await self._db.run(advance)

    async def aclose(self) -> None:
        await self._db.aclose()

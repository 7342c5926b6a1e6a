"""Crons in PostgreSQL (``serve --db postgresql://...``): every server process on the
database sees them, and each firing is claimed by one (a primary key decides)."""

from __future__ import annotations

import json
from typing import Any

from ...errors import PersistenceError
from ...persistence.pgsql import Migration, Op, PgDatabase, PgErrors, Stmt, prepare_schema
from ._books import KEPT_FIRINGS, rows_to_crons
from ._model import Cron

__all__ = ["PgCronBook"]

_MIGRATION = Migration(
    component="crons",
    version=1,
    ddl=(
        "CREATE TABLE deepactors_crons (cron_id text PRIMARY KEY, data jsonb NOT NULL,"
        " next_run double precision, created_at double precision NOT NULL)",
        "CREATE TABLE deepactors_cron_firings (cron_id text NOT NULL,"
        " tick double precision NOT NULL, PRIMARY KEY (cron_id, tick))",
    ),
    mismatch=PersistenceError,
)


def _prepare(location: str) -> Op[None]:
    return prepare_schema(_MIGRATION, location)


def _one(sql: str, params: tuple[Any, ...] = ()) -> Op[list[tuple[Any, ...]]]:
    return (yield Stmt(sql, params)).rows


class PgCronBook:
    """Crons in the PostgreSQL database at ``dsn``."""

    def __init__(self, dsn: str) -> None:
        self._db = PgDatabase(
            dsn,
            prepare=_prepare,
            errors=PgErrors(failed=PersistenceError, corrupt=PersistenceError),
            pool_size=2,
            lease_connections=1,
        )

    async def put(self, cron: Cron) -> None:
        await self._db.run(
            _one(
                "INSERT INTO deepactors_crons (cron_id, data, next_run, created_at)"
                " VALUES (%s, %s::jsonb, %s, %s) ON CONFLICT (cron_id) DO UPDATE"
                " SET data = excluded.data, next_run = excluded.next_run",
                (cron.cron_id, cron.dumps(), cron.next_run, cron.created_at),
            ),
            transaction=False,
        )

    async def get(self, cron_id: str) -> Cron | None:
        rows = await self._db.run(
            _one("SELECT cron_id, data::text FROM deepactors_crons WHERE cron_id = %s", (cron_id,)),
            transaction=False,
        )
        found = rows_to_crons(rows, self._db.location)
        return found[0] if found else None

    async def delete(self, cron_id: str) -> bool:
        def op() -> Op[bool]:
            yield Stmt("DELETE FROM deepactors_cron_firings WHERE cron_id = %s", (cron_id,))
            done = yield Stmt("DELETE FROM deepactors_crons WHERE cron_id = %s", (cron_id,))
            return done.rowcount > 0

        return await self._db.run(op())

    async def all(self) -> list[Cron]:
        rows = await self._db.run(
            _one("SELECT cron_id, data::text FROM deepactors_crons ORDER BY created_at"),
            transaction=False,
        )
        return rows_to_crons(rows, self._db.location)

    async def claim(self, cron_id: str, tick: float) -> bool:
        def op() -> Op[bool]:
            yield Stmt(
                "DELETE FROM deepactors_cron_firings WHERE tick < %s", (tick - KEPT_FIRINGS,)
            )
            done = yield Stmt(
                "INSERT INTO deepactors_cron_firings (cron_id, tick) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                (cron_id, tick),
            )
            return done.rowcount == 1

        return await self._db.run(op())

    async def advance(self, cron_id: str, tick: float, next_run: float | None) -> None:
        await self._db.run(
            _one(
                "UPDATE deepactors_crons SET next_run = %s,"
                " data = jsonb_set(data, '{next_run}', %s::jsonb)"
                " WHERE cron_id = %s AND next_run = %s",
                (next_run, json.dumps(next_run), cron_id, tick),
            ),
            transaction=False,
        )

    async def aclose(self) -> None:
        await self._db.aclose()

"""The database of the server's shared run registry: persistence's PgDatabase, set up for it.

:class:`~deepactors.persistence.pgsql.PgDatabase` does the connecting, on
asyncio or trio (the driver that fits the loop, one per event-loop run) and
the ``LISTEN``. What is the registry's own is here: its tables, made and
checked when the database opens (``_pg_schema``); its statements, written as
``(sql, params)`` pairs (:data:`Op`), each list of them run as one transaction;
and its errors: a database that cannot be reached when the server starts is a
:class:`~deepactors.errors.ConfigurationError`, a failure after that a
:class:`~deepactors.errors.PersistenceError` naming the database.

Every list of statements is committed before it returns; the notifications it
sends (``pg_notify``) are delivered at that commit, after the rows they point
at are visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

from ..errors import ConfigurationError, PersistenceError
from ..persistence.pgsql import Op as SqlOp
from ..persistence.pgsql import PgDatabase, PgErrors, Result, Stmt
from ._pg_schema import SCHEMA, check_version

__all__ = ["Op", "open_runs_db", "run_ops", "runs_database"]

Op: TypeAlias = tuple[str, Sequence[Any] | list[Sequence[Any]]]
"""One statement and its parameters; a list of parameter tuples runs it once per tuple."""

_ERRORS = PgErrors(failed=PersistenceError, corrupt=PersistenceError)


def _many(params: Sequence[Any] | list[Sequence[Any]]) -> bool:
    return isinstance(params, list) and bool(params) and isinstance(params[0], (tuple, list))


def _make_tables(location: str) -> SqlOp[None]:
    """Make the registry's tables if missing, and refuse another version's."""
    result = Result()
    for sql in SCHEMA:
        result = yield Stmt(sql)
    check_version(result.rows)


def runs_database(dsn: str, *, pool_size: int = 8) -> PgDatabase:
    """The runs database at ``dsn``; nothing is connected until it is first used.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        pool_size: Connections for its statements, per event-loop run (the
            listener has one more of its own).

    Raises:
        ConfigurationError: ``dsn`` is not a connection string.
    """
    try:
        # The registry holds no leases: its lease pool, which opens connections
        # only for leases, stays empty.
        return PgDatabase(
            dsn, prepare=_make_tables, errors=_ERRORS, pool_size=pool_size, lease_connections=1
        )
    except ValueError as exc:
        raise ConfigurationError(f"the runs database: {exc}") from None


async def open_runs_db(db: PgDatabase) -> None:
    """Connect to the runs database in this event-loop run, making its tables if missing.

    Raises:
        ConfigurationError: The database cannot be reached, or holds the
            tables of another schema version.
    """
    try:
        await db.driver()
    except PersistenceError as exc:
        raise ConfigurationError(f"cannot connect to the runs database: {exc}") from exc


def _statements(ops: Sequence[Op]) -> SqlOp[list[tuple[Any, ...]]]:
    rows: list[tuple[Any, ...]] = []
    for sql, params in ops:
        many = _many(params)
        result = yield Stmt(sql, params, many=many)
        if not many:
            rows = result.rows
    return rows


async def run_ops(db: PgDatabase, ops: Sequence[Op]) -> list[tuple[Any, ...]]:
    """Run ``ops`` in one transaction; the rows of the last statement (run once).

    Raises:
        PersistenceError: The database failed; nothing of ``ops`` was committed.
    """
    return await db.run(_statements(ops), transaction=len(ops) > 1)

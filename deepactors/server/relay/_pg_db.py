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

The relay's ``LISTEN`` connection is kept up by :class:`Listening`: when it
drops (the database restarted, or is down), it is opened again with a
bounded, jittered backoff, for as long as the server runs; meanwhile
:attr:`Listening.state` says the database is down, since when and why, for the
readiness endpoint and for requests that would otherwise wait on it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio
from anyio.abc import TaskStatus

from ..._core.logs import get_logger
from ..._core.stamps import utc_stamp
from ...errors import ConfigurationError, DatabaseUnavailable, PersistenceError
from ...persistence.pgsql import Op as SqlOp
from ...persistence.pgsql import PgDatabase, PgErrors, Result, Stmt
from ._backoff import backoff
from ._pg_schema import SCHEMA, check_version

__all__ = ["DbState", "Listening", "Op", "open_runs_db", "run_ops", "runs_database"]

_log = get_logger("deepactors.server")

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


@dataclass(frozen=True, slots=True, kw_only=True)
class DbState:
    """The runs database as the relay last found it.

    Attributes:
        location: The database, without credentials.
        up: Whether the relay is connected (listening) now.
        since: When that last changed (``time.time()``).
        error: Why it is down, when it is.
    """

    location: str
    up: bool
    since: float
    error: str | None = None

    def describe(self) -> str:
        """One sentence for a log, an error or the readiness endpoint."""
        if self.up:
            return f"the runs database {self.location} is connected"
        when = utc_stamp(self.since)
        return f"the runs database {self.location} is unreachable since {when}: {self.error}"


Connected = Callable[[int], Awaitable[None]]
"""Called once listening, with the backend pid of the ``LISTEN`` connection."""


class Listening:
    """The relay's ``LISTEN`` connection, opened again whenever it drops.

    Args:
        db: The runs database.
        channel: What to listen to.
        on_payload: Called in this event-loop run with each notification's payload.
        connected: Called each time the connection is (re)established, before
            the database is said to be up.
    """

    def __init__(
        self,
        db: PgDatabase,
        channel: str,
        on_payload: Callable[[str], None],
        connected: Connected,
    ) -> None:
        self._db = db
        self._channel = channel
        self._on_payload = on_payload
        self._connected = connected
        self.state = DbState(location=db.location, up=False, since=time.time(), error="not yet")

    def _set(self, up: bool, error: str | None = None) -> None:
        if up != self.state.up:
            self.state = DbState(location=self._db.location, up=up, since=time.time(), error=error)
        elif error != self.state.error:
            # Down still, for another reason: "since" stays when it went down.
            self.state = dataclasses.replace(self.state, error=error)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled, reconnecting after a drop.

        ``task_status.started()`` once first connected. The first connection
        failing raises (the server does not start); later failures are waited
        out.

        Raises:
            PersistenceError: The first connection failed.
        """
        attempt = 0
        first = True
        while True:
            lost: PersistenceError | None = None
            try:
                async with anyio.create_task_group() as tg:
                    pid = await tg.start(self._listen)
                    await self._connected(pid)
                    self._set(True)
                    if first:
                        task_status.started()
                        first = False
                    else:
                        _log.warning("runs database reconnected", location=self._db.location)
                    attempt = 0
            except* PersistenceError as group:
                lost = _first_error(group)
            if lost is None:  # pragma: no cover - the listener never returns quietly
                continue
            if first:
                raise lost
            if self.state.up:
                _log.error(
                    "runs database connection lost; reconnecting",
                    location=self._db.location,
                    error=str(lost),
                )
            # Why, without the database's name (the state says it): for an
            # outage, the driver's own words, not "unreachable since" twice.
            why = lost.__cause__ if isinstance(lost, DatabaseUnavailable) else None
            self._set(False, str(why or lost).removeprefix(f"{self._db.location}: "))
            await anyio.sleep(backoff(attempt))
            attempt += 1

    async def _listen(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        await self._db.listen(self._channel, self._on_payload, task_status=task_status)
        # The listener returns only when its connection ended without an error.
        raise PersistenceError(f"{self._db.location}: the LISTEN connection ended")


def _first_error(group: BaseExceptionGroup[PersistenceError]) -> PersistenceError:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, PersistenceError)
    return error

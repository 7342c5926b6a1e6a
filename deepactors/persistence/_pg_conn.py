"""PostgreSQL connections on either event loop, for the checkpointer, the store
and the server's shared run registry (``deepactors.server._pg_relay``).

A :class:`PgDatabase` opens, lazily on first use in an event-loop run, the
driver that fits that loop, and keeps one per live run (a
:class:`~deepactors._core.perloop.PerLoop`, as the SQLite database does):

- **asyncio**: psycopg's ``AsyncConnectionPool``; no threads. ``LISTEN`` on
  an async connection.
- **trio**: psycopg's sync ``ConnectionPool``, each operation run whole in an
  anyio worker thread (one hop per operation, as SQLite does on trio).
  ``LISTEN`` on a sync connection in a worker thread of its own that hands
  each notification back to the loop.

Both run the same operations (``_pg_sql``): a generator of statements run in
one transaction on one pooled connection. Connections are in autocommit mode,
so a transaction is exactly the operation's ``BEGIN ... COMMIT``, and an
operation that returns has committed.

Puts go through one more connection per run, the writer, kept open: group
commit has one committer at a time, and a kept connection saves a pool checkout
per put. Lease connections come from a second pool: a run holds one for its whole
duration (its session advisory lock lives on it), so leases can never starve
the writers of connections. A lease connection is given back only after
``pg_advisory_unlock_all()`` succeeded on it, and closed otherwise, so no lock
can outlive its lease, whatever went wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import anyio
import psycopg
from anyio.abc import TaskStatus
from psycopg.conninfo import conninfo_to_dict

from .._core.logs import get_logger
from .._core.loops import UnsupportedLoop, current_run
from .._core.perloop import PerLoop
from ..errors import DatabaseUnavailable, PersistenceError
from ._pg_async import AsyncDriver
from ._pg_drive import DOWN_WAIT, OPEN_TIMEOUT, Driver, LeaseConnection, Unreachable
from ._pg_sql import Op, Stmt
from ._pg_thread import ThreadDriver

__all__ = ["LeaseConnection", "PgDatabase", "PgErrors", "describe_dsn"]

T = TypeVar("T")

_log = get_logger("deepactors")


@dataclass(frozen=True, slots=True, kw_only=True)
class PgErrors:
    """The exceptions one component raises: a failure, corruption, the database
    out of reach."""

    failed: type[PersistenceError]
    corrupt: type[PersistenceError]
    unavailable: type[DatabaseUnavailable] = DatabaseUnavailable


def describe_dsn(dsn: str) -> str:
    """The database a DSN names, for messages: ``postgresql://host:port/db`` (no password).

    Raises:
        ValueError: ``dsn`` is not a connection string psycopg can read.
    """
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"not a PostgreSQL connection string: {exc}") from None
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{host}{port}/{parts.get('dbname') or parts.get('user') or ''}"


def _ping() -> Op[None]:
    yield Stmt("SELECT 1")


async def _close(driver: Driver) -> None:
    await driver.aclose()


async def _close_stale(driver: Driver) -> None:
    # An async pool belongs to its ended loop and cannot be closed from here;
    # its connections close when it is collected.
    if isinstance(driver, ThreadDriver):
        await driver.aclose_stale()


class PgDatabase:
    """The lazily opened, loop-adaptive pools of one database (see the module docstring).

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        prepare: Makes, given :attr:`location`, the operation that creates or
            checks the component's tables.
        errors: The component's exceptions.
        pool_size: Connections for reads and writes, per event-loop run.
        lease_connections: Connections for held leases, per event-loop run.
    """

    def __init__(
        self,
        dsn: str,
        *,
        prepare: Callable[[str], Op[None]],
        errors: PgErrors,
        pool_size: int,
        lease_connections: int,
    ) -> None:
        self.dsn = dsn
        self.location = describe_dsn(dsn)
        self.errors = errors
        self._prepare = prepare
        self._sizes = (pool_size, lease_connections)
        self._drivers: PerLoop[Driver] = PerLoop(self._open, _close, close_stale=_close_stale)
        # Since when no connection could be had (None: reached last time).
        self._down_since: float | None = None

    async def _open(self) -> Driver:
        library = current_run().library
        driver: AsyncDriver | ThreadDriver
        if library == "asyncio":
            driver = AsyncDriver(self.dsn, *self._sizes)
        else:
            driver = ThreadDriver(self.dsn, *self._sizes)
        try:
            with self.translating():
                await driver.open(self._prepare(self.location))
        except BaseException:
            await driver.aclose()
            raise
        return driver

    async def driver(self) -> Driver:
        """This run's driver, opened (and the schema checked) on first use.

        Raises:
            PersistenceError: Of the component's failure kind.
        """
        try:
            return await self._drivers.get()
        except UnsupportedLoop as exc:
            raise self.errors.failed(f"{self.location}: PostgreSQL persistence: {exc}") from None

    async def run(self, op: Op[T], *, transaction: bool = True) -> T:
        """Run ``op`` on a pooled connection of this run, in one transaction.

        Args:
            op: The operation.
            transaction: False for an operation of one statement, which is
                its own transaction in autocommit (two round trips fewer).

        Raises:
            PersistenceError: Of the component's kinds; psycopg's errors become
                its failure kind, naming the database.
        """
        driver = await self.driver()
        # Known down: a short wait for the pool, so the outage is told at once.
        wait = OPEN_TIMEOUT if self._down_since is None else DOWN_WAIT
        with self.translating():
            return await driver.run(op, transaction=transaction, wait=wait)

    async def write(self, op: Op[T], *, transaction: bool) -> T:
        """Run ``op`` on this run's writer connection (one writer at a time).

        Group commit has one committer at a time per run, so one connection
        kept for it saves a pool checkout per put.

        Raises:
            PersistenceError: As :meth:`run`.
        """
        driver = await self.driver()
        with self.translating():
            return await driver.write(op, transaction=transaction)

    async def listen(
        self,
        channel: str,
        on_payload: Callable[[str], None],
        *,
        task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """``LISTEN`` on ``channel`` until cancelled, calling ``on_payload`` in this run.

        The listener has a connection of its own, beside the pools. It reports
        that connection's backend pid through ``task_status`` once listening:
        other processes can tell this one is alive while that backend is (a
        process that dies closes its connection).

        Raises:
            PersistenceError: As :meth:`run`.
        """
        driver = await self.driver()
        with self.translating():
            await driver.listen(channel, on_payload, task_status)

    async def ping(self) -> None:
        """Check the database answers: one round trip on a pooled connection.

        Raises:
            PersistenceError: As :meth:`run`.
        """
        await self.run(_ping(), transaction=False)

    @contextmanager
    def translating(self) -> Iterator[None]:
        """Turn psycopg's errors (and pool timeouts) into the component's failure.

        Failing to get a connection is the component's ``unavailable`` error,
        naming the database and since when; the outage is logged once, when
        it begins, and once more when a connection is had again.
        """
        try:
            yield
        except Unreachable as exc:
            raise self._unreachable(exc) from exc.__cause__
        except (psycopg.Error, TimeoutError) as exc:
            raise self.errors.failed(f"{self.location}: {exc}") from exc
        else:
            if self._down_since is not None:
                self._down_since = None
                _log.warning("database reachable again", location=self.location)

    def _unreachable(self, exc: Unreachable) -> DatabaseUnavailable:
        if self._down_since is None:
            self._down_since = time.time()
            _log.error("database unreachable", location=self.location, error=str(exc))
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._down_since))
        return self.errors.unavailable(
            f"{self.location} is unreachable since {when}: {exc}",
            location=self.location,
            since=self._down_since,
        )

    async def aclose(self) -> None:
        """Close this run's pools, if open; a later :meth:`run` reopens."""
        await self._drivers.aclose()

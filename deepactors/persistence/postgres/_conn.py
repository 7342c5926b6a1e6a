"""PostgreSQL connections on either event loop, for the checkpointer, the store
and the server's shared run registry (``deepactors.server.relay._pg_relay``).

A :class:`PgDatabase` opens, lazily on first use in an event-loop run, the
driver that fits that loop, and keeps one per live run (a
:class:`~deepactors._core.perloop.PerLoop`, as the SQLite database does):

- **asyncio**: psycopg's ``AsyncConnectionPool``; no threads. ``LISTEN`` on
  an async connection.
- **trio**: psycopg's sync ``ConnectionPool``, each operation run whole in an
  anyio worker thread (one hop per operation, as SQLite does on trio).
  ``LISTEN`` on a sync connection in a worker thread of its own that hands
  each notification back to the loop.

Both run the same operations (``_sql``): a generator of statements run in
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

A checkout that waits :data:`~._drive.PROBE_AFTER` for either pool in vain
asks the server for a connection of its own (``_probe``): refused, the
database is down and the caller hears so within seconds (the component's
``unavailable`` error); made, the pool is only busy and the checkout waits on.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TypeVar, final

import anyio
import psycopg
from anyio.abc import TaskStatus
from psycopg.conninfo import conninfo_to_dict

from ..._core.logs import get_logger
from ..._core.loops import UnsupportedLoop, current_run
from ..._core.perloop import PerLoop
from ..._core.stamps import utc_stamp
from ...errors import ConfigurationError, DatabaseUnavailable, PersistenceError
from ._async import AsyncDriver
from ._drive import (
    DOWN_WAIT,
    OPEN_TIMEOUT,
    PROBE_AFTER,
    CheckoutTimeout,
    Driver,
    LeaseConnection,
    Unreachable,
)
from ._sql import Op, Stmt
from ._thread import ThreadDriver

__all__ = ["LeaseConnection", "PgDatabase", "PgErrors", "PoolWaits", "describe_dsn"]

T = TypeVar("T")

_log = get_logger("deepactors")


@final
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


def _nothing() -> Op[None]:
    return
    yield  # a generator of no statement: only the checkout is done


async def _close(driver: Driver) -> None:
    await driver.aclose()


async def _close_stale(driver: Driver) -> None:
    # An async pool belongs to its ended loop and cannot be closed from here;
    # its connections close when it is collected.
    if isinstance(driver, ThreadDriver):
        await driver.aclose_stale()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class PoolWaits:
    """How long a request waits for a pooled connection (see :func:`_checked_out`).

    Attributes:
        checkout: Seconds in all (:data:`~._drive.OPEN_TIMEOUT` by default).
        down: Seconds while the database is known down (:data:`~._drive.DOWN_WAIT`).
        probe_after: Seconds before asking the server whether it is up
            (:data:`~._drive.PROBE_AFTER`).

    Raises:
        ConfigurationError: A wait that is not a number of seconds above 0, by
            the keyword its component takes.
    """

    checkout: float = OPEN_TIMEOUT
    down: float = DOWN_WAIT
    probe_after: float = PROBE_AFTER

    def __post_init__(self) -> None:
        for name, seconds in (
            ("checkout_timeout", self.checkout),
            ("down_wait", self.down),
            ("probe_after", self.probe_after),
        ):
            if not 0 < seconds < math.inf:  # NaN too
                raise ConfigurationError(
                    f"{name} must be a positive number of seconds, not {seconds!r}"
                )


@final
class PgDatabase:
    """The lazily opened, loop-adaptive pools of one database (see the module docstring).

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        prepare: Makes, given :attr:`location`, the operation that creates or
            checks the component's tables.
        errors: The component's exceptions.
        pool_size: Connections for reads and writes, per event-loop run.
        lease_connections: Connections for held leases, per event-loop run.
        waits: How long a request waits for a pooled connection (None: the defaults).
    """

    def __init__(
        self,
        dsn: str,
        *,
        prepare: Callable[[str], Op[None]],
        errors: PgErrors,
        pool_size: int,
        lease_connections: int,
        waits: PoolWaits | None = None,
    ) -> None:
        self.dsn = dsn
        self._waits = PoolWaits() if waits is None else waits
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
        with self.translating():
            # Tried again after a CheckoutTimeout: ``op`` has not begun then.
            return await self._checked_out(
                driver, lambda wait: driver.run(op, transaction=transaction, wait=wait)
            )

    @asynccontextmanager
    async def lease_connection(self) -> AsyncIterator[LeaseConnection]:
        """A connection of the lease pool, held for the block (a lease's lock lives on it).

        Given back on leaving, its advisory locks released first (or closed).

        Raises:
            PersistenceError: As :meth:`run`, on taking it; the block's own
                errors pass through as they are.
        """
        driver = await self.driver()
        async with AsyncExitStack() as stack:
            with self.translating():
                conn = await self._checked_out(
                    driver,
                    lambda wait: stack.enter_async_context(driver.lease_connection(wait)),
                    pool_size=self._sizes[1],
                )
            yield conn

    async def reach(self) -> None:
        """Check a connection can be had now, without a round trip.

        A pooled connection whose socket stayed silent while idle is taken as
        live (see ``_drive``); a server that ended its sessions, or one that
        takes no new connection, fails this within a few seconds.

        Raises:
            PersistenceError: The component's ``unavailable`` kind, as :meth:`run`.
        """
        await self.run(_nothing(), transaction=False)

    async def _checked_out(
        self,
        driver: Driver,
        attempt: Callable[[float], Awaitable[T]],
        *,
        pool_size: int | None = None,
    ) -> T:
        """``attempt(wait)``, which waits ``wait`` seconds for a pooled
        connection, given up to ``waits.checkout`` (:data:`OPEN_TIMEOUT`) in all,
        unless the server is found down first.

        Raises:
            Unreachable: The server takes no connection (the probe failed).
            DatabaseUnavailable: The component's ``unavailable`` kind: the
                database is up but no connection of the pool came free within
                :data:`OPEN_TIMEOUT` (it says so; the database is not marked down).
        """
        # Known down, the pool is given a second (it keeps reconnecting on its
        # own); otherwise long enough for a busy moment to pass.
        waits = self._waits
        first = waits.down if self._down_since is not None else waits.probe_after
        deadline = anyio.current_time() + waits.checkout
        try:
            return await attempt(min(first, waits.checkout))
        except CheckoutTimeout:
            pass
        # Down, or every connection in use: only a connection of our own
        # tells which. Refused, this raises and the request is answered now.
        await driver.probe()
        try:
            return await attempt(max(0.0, deadline - anyio.current_time()))
        except CheckoutTimeout as exc:
            # The server took the probe's connection: the pool is only busy.
            # Not an outage (not logged as one, nor marked down, so the next
            # request waits as long), but no connection either: the same
            # request may succeed later, which a client is told (503) as for
            # an outage, the message saying which.
            size = self._sizes[0] if pool_size is None else pool_size
            raise self.errors.unavailable(
                f"{self.location}: no connection came free within {waits.checkout:g} s"
                f" (all {size} of the pool in use): {exc}",
                location=self.location,
                since=time.time(),
            ) from exc

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
        when = utc_stamp(self._down_since)
        return self.errors.unavailable(
            f"{self.location} is unreachable since {when}: {exc}",
            location=self.location,
            since=self._down_since,
        )

    async def aclose(self) -> None:
        """Close this run's pools, if open; a later :meth:`run` reopens."""
        await self._drivers.aclose()

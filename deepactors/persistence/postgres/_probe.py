"""Whether a PostgreSQL server takes a new connection: an outage told from a busy pool.

A pool that hands out no connection within its wait gives no reason: its
background connects may be failing (the database is down) or every connection
may be in use (a burst of work, more threads held than there are lease
connections). psycopg_pool has no cheaper signal: ``reconnect_failed`` is
called only once its reconnection attempts have run for ``reconnect_timeout``
(30 s), ``get_stats()`` counts failed connects but a pool at its maximum size
makes none to count, and ``check()`` tries only the idle connections. So the
question is put to the server itself: a new connection of its own, with a
short ``connect_timeout``, closed at once.

A :class:`Probe` is one per driver (one per event-loop run) and asks at most
one question at a time; the tasks that came while it was being asked share
its answer. During an outage, requests that all time out together cost one
connection attempt, not one each; and a task that comes after an answer asks
anew, so an answer is never older than the task that hears it (a database back
up is seen by the first request after it, not a second later).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread
import psycopg

from ._drive import Unreachable

__all__ = ["PROBE_TIMEOUT", "Probe", "probe_async", "probe_sync"]

PROBE_TIMEOUT = 2
"""The probe's ``connect_timeout``, in seconds (libpq's minimum: 1 counts as 2)."""


async def probe_async(dsn: str) -> None:
    """Connect to ``dsn`` and close again, on the event loop (asyncio).

    Raises:
        psycopg.OperationalError: The server took no connection.
    """
    # Cancelled while connecting, psycopg drops the half-made connection.
    conn = await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, connect_timeout=PROBE_TIMEOUT
    )
    await conn.close()


def _connect_and_close(dsn: str) -> None:
    psycopg.Connection.connect(dsn, autocommit=True, connect_timeout=PROBE_TIMEOUT).close()


async def probe_sync(dsn: str) -> None:
    """:func:`probe_async` with psycopg's blocking connect, in a worker thread (trio).

    Raises:
        psycopg.OperationalError: The server took no connection.
    """
    # Abandoned when cancelled: the thread ends within PROBE_TIMEOUT on its
    # own and closes what it made, so nothing is left to clean up here.
    await anyio.to_thread.run_sync(_connect_and_close, dsn, abandon_on_cancel=True)


class Probe:
    """Asks whether the server takes a connection, one question at a time.

    Args:
        ask: Connects and closes again; raises ``psycopg.OperationalError``
            when it cannot (:func:`probe_async` or :func:`probe_sync`, bound
            to the DSN).
    """

    def __init__(self, ask: Callable[[], Awaitable[None]]) -> None:
        self._ask = ask
        self._lock = anyio.Lock()
        # How many answers came so far, and the last one's failure if any.
        self._answers = 0
        self._failure: str | None = None
        self._cause: psycopg.OperationalError | None = None

    async def __call__(self) -> None:
        """Return if the server takes a connection now; raise if not.

        Raises:
            Unreachable: It does not (refused, or no answer within
                :data:`PROBE_TIMEOUT`); the psycopg error is the cause.
        """
        # Waiters queue on the lock; one that finds an answer came while it
        # waited takes that one. An answer from before it came is not given
        # again: the server may have come back (or gone) since.
        asked_meanwhile = self._answers if self._lock.locked() else None
        async with self._lock:
            if asked_meanwhile is None or self._answers == asked_meanwhile:
                try:
                    await self._ask()
                except psycopg.OperationalError as exc:
                    self._failure, self._cause = str(exc), exc
                else:
                    self._failure, self._cause = None, None
                self._answers += 1
            failure, cause = self._failure, self._cause
        if failure is not None:
            # A new exception per task: one raised in several would share a traceback.
            raise Unreachable(failure) from cause

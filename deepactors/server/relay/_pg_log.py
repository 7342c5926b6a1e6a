"""Resumable streams across server processes: a run's frame log in the runs database.

The process that runs a resumable run keeps its frames in a
:class:`~._frame_log.FrameLog`; with a runs database (``--workers``,
``--runs-db``), a :class:`RunLogSink` copies each frame into
``deepactors_run_log`` (one row per frame, numbered as its ``id:``), through
the relay's writer, so the run never waits on the database. When the log
drops its oldest frames (its byte limit), their rows are deleted; when it ends,
a row with no frame marks the end.

Another process that is asked to rejoin the run (``Last-Event-ID`` on ``GET
.../runs/{id}/stream``) makes a copy of the log (:class:`LogMirrors`): it reads
the rows kept, then the new ones each time a notification says the run changed,
until the end row. If the owner dies first, the copy ends with the ``error``
event the run's followers get (``WorkerLost``); if the database stays
unreachable, with an error that says so. Rows of runs that ended a while ago
are swept with their other frames (``_pg_relay``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from ...errors import PersistenceError
from ...persistence.pgsql import PgDatabase
from .._frames import sse_frame
from .._records import RunRecord
from ._backoff import FOLLOW_PATIENCE, backoff
from ._frame_log import FrameLog
from ._pg_db import run_ops
from ._pg_follow import LIVENESS_EVERY
from ._pg_schema import LOST

__all__ = ["SWEEP_ENDED", "LogMirrors", "Queue", "RunLogSink"]

Queue = Callable[..., None]
"""The relay's writer: ``queue(sql, params, notify_run_id, keep=...)``."""

_PAGE = 2000
"""Rows read at once when copying a log."""

SWEEP_ENDED = (
    "DELETE FROM {table} l USING deepactors_runs r"
    " WHERE l.run_id = r.run_id AND r.status IN"
    " ('error', 'success', 'timeout', 'interrupted') AND r.updated_at < %s"
)
"""Deletes the rows of ``table`` (frames, logs) of runs that ended before a time."""

_OWNER_ALIVE = """SELECT EXISTS (SELECT 1 FROM deepactors_runs r JOIN pg_stat_activity a
    ON a.pid = r.owner_pid AND a.backend_start = r.owner_start WHERE r.run_id = %s)"""


class RunLogSink:
    """Copies one run's :class:`FrameLog` into ``deepactors_run_log``.

    Args:
        queue: The relay's writer.
        run_id: The run.
    """

    def __init__(self, queue: Queue, run_id: str) -> None:
        self._queue = queue
        self._run_id = run_id

    def kept(self, number: int, frame: bytes) -> None:
        self._queue(
            "INSERT INTO deepactors_run_log (run_id, n, frame) VALUES (%s, %s, %s)",
            (self._run_id, number, frame.decode()),
            self._run_id,
        )

    def dropped(self, first: int) -> None:
        self._queue(
            "DELETE FROM deepactors_run_log WHERE run_id = %s AND n < %s",
            (self._run_id, first),
            None,
        )

    def ended(self, end: int) -> None:
        # Kept through an outage, or a copy elsewhere would wait for ever.
        self._queue(
            "INSERT INTO deepactors_run_log (run_id, n, frame) VALUES (%s, %s, NULL)"
            " ON CONFLICT DO NOTHING",
            (self._run_id, end),
            self._run_id,
            keep=True,
        )


class LogMirrors:
    """Copies of the logs of other processes' runs, kept up to date here.

    Args:
        db: The runs database.
        check_up: Raises PersistenceError while the relay knows the database is down.
        spawn: Starts a task in the relay's task group.
        patience: Seconds a copy keeps trying while the database is unreachable.
    """

    def __init__(
        self,
        db: PgDatabase,
        check_up: Callable[[], None],
        spawn: Callable[..., None],
        *,
        patience: float = FOLLOW_PATIENCE,
    ) -> None:
        self._db = db
        self._check_up = check_up
        self._spawn = spawn
        self._patience = patience
        self._copies: dict[str, tuple[FrameLog, list[anyio.Event]]] = {}

    def notified(self, run_id: str) -> None:
        """The run's row or log changed: copies of its log read the new rows."""
        copy = self._copies.get(run_id)
        if copy is not None:
            copy[1][0].set()

    async def log_of(self, run: RunRecord, max_bytes: int) -> FrameLog | None:
        """A copy of the log of ``run`` (None: the database keeps none of it).

        Raises:
            PersistenceError: The database is unreachable.
        """
        known = self._copies.get(run.run_id)
        if known is not None:
            return known[0]
        self._check_up()
        log = FrameLog(max_bytes=max_bytes)
        wake = [anyio.Event()]
        rows = await self._rows(run.run_id, 0)
        known = self._copies.get(run.run_id)  # made meanwhile by another request
        if known is not None:
            return known[0]
        if not rows and run.done.is_set():
            return None  # swept, or never streamed resumably
        _copy(log, rows)
        if not log.closed:
            self._copies[run.run_id] = (log, wake)
            self._spawn(self._keep_up, run, log, wake)
        return log

    async def _rows(self, run_id: str, start: int) -> list[tuple[Any, ...]]:
        return await run_ops(
            self._db,
            [
                (
                    "SELECT n, frame FROM deepactors_run_log WHERE run_id = %s AND n >= %s"
                    " ORDER BY n LIMIT %s",
                    (run_id, start, _PAGE),
                )
            ],
        )

    async def _keep_up(self, run: RunRecord, log: FrameLog, wake: list[anyio.Event]) -> None:
        run_id = run.run_id
        quiet = False  # no news for a while: is the owner still alive?
        failing_since: float | None = None
        attempt = 0
        try:
            while not log.closed:
                wake[0] = anyio.Event()
                ended = run.done.is_set()  # before the read: its rows are all in by then
                try:
                    self._check_up()
                    rows = await self._rows(run_id, log.end)
                    alive = True
                    if quiet and not rows:
                        alive = bool((await run_ops(self._db, [(_OWNER_ALIVE, (run_id,))]))[0][0])
                except PersistenceError as exc:
                    now = anyio.current_time()
                    failing_since = now if failing_since is None else failing_since
                    if now - failing_since >= self._patience:
                        message = f"lost track of the run: {exc}"
                        error = {"error": "RunsDatabaseUnreachable", "message": message}
                        _end(log, error)
                        return
                    await anyio.sleep(backoff(attempt))
                    attempt += 1
                    continue
                failing_since, attempt = None, 0
                _copy(log, rows)
                if log.closed or len(rows) == _PAGE:
                    continue  # more to read at once
                if not alive:  # it died before it ended the log
                    _end(log, LOST["__error__"])
                    return
                if ended and log.end == 0:  # it ended and kept nothing (or was swept)
                    log.close()
                    return
                quiet = True
                with anyio.move_on_after(LIVENESS_EVERY):
                    await wake[0].wait()
                    quiet = False
        finally:
            self._copies.pop(run_id, None)
            log.close()  # the server is shutting down: streams of it end


def _copy(log: FrameLog, rows: list[tuple[Any, ...]]) -> None:
    for number, frame in rows:
        if frame is None:
            log.close()
            return
        log.put(number, frame.encode())


def _end(log: FrameLog, error: dict[str, str]) -> None:
    log.put(log.end, sse_frame("error", error))
    log.close()

"""Following a run of another server process through the runs database (``_pg_relay``).

A follower reads the run's row and the SSE frames rendered for its watches
each time a notification says they changed, and, after a quiet while, checks
that the owner is still alive (a dead owner's run is marked lost).

While the database is unreachable (a restart), the follower keeps trying, with
backoff, for its patience (:data:`FOLLOW_PATIENCE` unless the relay is given
another); the run goes on in its own process
meanwhile. Past that, the run ends here as an error that says so, so a client
joining it is answered in bounded time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ..._core.jsonvalue import JSONObject
from ...errors import PersistenceError
from ...events import Event
from ...persistence.pgsql import PgDatabase
from .._records import RunRecord
from ._backoff import FOLLOW_PATIENCE, backoff
from ._pg_db import Op, run_ops
from ._pg_schema import LOST, MARK_LOST, jsonb
from ._relay import FINAL

__all__ = ["FOLLOW_PATIENCE", "LIVENESS_EVERY", "Followed", "follow_run"]

LIVENESS_EVERY = 2.0
"""Seconds a follower waits for news before checking the owner is still alive."""


@dataclass(slots=True, eq=False)
class Followed:
    """A run of another process that this one follows."""

    wake: anyio.Event = field(default_factory=anyio.Event)
    streams: dict[str, MemoryObjectSendStream[Event | bytes]] = field(default_factory=dict)


def _unreachable(exc: PersistenceError) -> JSONObject:
    message = f"lost track of the run: {exc}"
    return {"__error__": {"error": "RunsDatabaseUnreachable", "message": message}}


async def follow_run(
    db: PgDatabase,
    run: RunRecord,
    followed: Followed,
    check_up: Callable[[], None],
    *,
    patience: float = FOLLOW_PATIENCE,
) -> None:
    """Keep ``run`` up to date until it ends (see the module docstring).

    Args:
        db: The runs database.
        run: The followed run: its status, times and result are set here.
        followed: Its wake-up event and its watchers' streams, which get the frames.
        check_up: Raises PersistenceError while the relay knows the database is down.
        patience: Seconds it keeps trying while the database is unreachable.
    """
    last = 0
    quiet = True  # no news for a while: is its owner still alive?
    failing_since: float | None = None
    attempt = 0
    while True:
        wake = followed.wake = anyio.Event()
        try:
            check_up()
            rows, frames = await _read(db, run.run_id, last, quiet)
        except PersistenceError as exc:
            now = anyio.current_time()
            failing_since = now if failing_since is None else failing_since
            if now - failing_since >= patience:
                run.status, run.updated_at = "error", time.time()
                run.result, run.finished_at = _unreachable(exc), run.updated_at
                return
            await anyio.sleep(backoff(attempt))
            attempt += 1
            continue
        failing_since, attempt = None, 0
        for seq, watch_id, frame in frames:
            last = seq
            stream = followed.streams.get(watch_id)
            if stream is not None:
                try:
                    stream.send_nowait(frame.encode())
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    followed.streams.pop(watch_id, None)
        status, updated_at, result = rows[0] if rows else ("error", time.time(), None)
        run.status, run.updated_at = status, updated_at
        if status in FINAL:
            run.result = result or {}
            run.finished_at = updated_at
            return
        quiet = True
        with anyio.move_on_after(LIVENESS_EVERY):
            await wake.wait()
            quiet = False


async def _read(
    db: PgDatabase, run_id: str, after: int, quiet: bool
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The run's row (marked lost first if quiet and its owner is gone), and its new frames."""
    lost: list[Op] = []
    if quiet:
        lost.append((MARK_LOST.format(where="run_id = %s"), (jsonb(LOST), time.time(), run_id)))
    rows = await run_ops(
        db,
        [
            *lost,
            ("SELECT status, updated_at, result FROM deepactors_runs WHERE run_id = %s", (run_id,)),
        ],
    )
    frames = await run_ops(
        db,
        [
            (
                "SELECT seq, watch_id, frame FROM deepactors_run_events"
                " WHERE run_id = %s AND seq > %s ORDER BY seq",
                (run_id, after),
            )
        ],
    )
    return rows, frames

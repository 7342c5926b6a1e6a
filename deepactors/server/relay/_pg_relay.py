"""Runs shared by server processes through PostgreSQL (``--runs-db postgresql://``).

Tables (made on first use, under an advisory lock so processes starting
together do not race on ``CREATE``):

- ``deepactors_runs``: one row per run: its protocol fields, its status, its
  final values, and its *owner*, the backend pid and start time of the owning
  process's ``LISTEN`` connection. A process that dies closes that connection,
  so a run whose owner is no longer in ``pg_stat_activity`` is known to be lost.
- ``deepactors_run_watches``: a follower in another process wants a run's
  stream in these modes.
- ``deepactors_run_events``: SSE frames the owner rendered for those watches,
  numbered per run.
- ``deepactors_run_log``: the frames of resumable runs, by id, so that any
  process serves a rejoin with ``Last-Event-ID`` (``_pg_log``).

Notifications on one channel carry ids only (``NOTIFY`` payloads are small, and
rows are the truth): ``r:<run>`` the run's row or frames changed, ``w:<run>``
a watch was added (for the owner), ``c:<run>:<action>`` cancel it (for the owner).

The owner never waits on the database while it drives a run: status changes and
frames go through one writer task, which writes whatever has accumulated in one
transaction (group commit) and notifies once per run touched. Only creating a
run is awaited, so that any process can find the run as soon as its id is out.

When the database restarts or goes down, the ``LISTEN`` connection drops and is
opened again with backoff (``_pg_db.Listening``). Meanwhile what needs the
database fails at once, naming it and since when it is unreachable; frames are
dropped, but the final status of runs that end is kept and written once it is
back, and the runs still going are put under the new connection (their owner),
so other processes do not take them for lost.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
import psycopg
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..._core.jsonvalue import JSONObject
from ..._core.logs import get_logger
from ...errors import ConfigurationError, DatabaseUnavailable, PersistenceError
from ...events import Event
from ...langchain.views import LangGraphStream
from .._frames import part_frames
from .._records import RunRecord, new_uuid
from .._wire_json import GivenModes
from ._backoff import FOLLOW_PATIENCE, patience
from ._frame_log import FrameLog, LogSink
from ._pg_db import Listening, Op, open_runs_db, run_ops, runs_database
from ._pg_follow import Followed, follow_run
from ._pg_log import SWEEP_ENDED, LogMirrors, RunLogSink
from ._pg_schema import LOST, MARK_LOST, RUN_COLUMNS, jsonb, shared_run
from ._relay import CancelHandler, SharedRun, SharedThread

__all__ = ["PgRelay"]

_log = get_logger("deepactors.server")

CHANNEL = "deepactors_runs"
FRAMES_KEPT = 300.0
"""Seconds the SSE frames of an ended run are kept for its followers (then swept)."""


@dataclass(slots=True, eq=False)
class _Commit:
    """Set when a write that someone waits for is committed (or failed)."""

    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None


class _Write(NamedTuple):
    op: Op
    notify: str | None  # the run whose followers to wake
    commit: _Commit | None
    keep: bool = False  # a status: written later if it cannot be now


@dataclass(slots=True, eq=False)
class _Owned:
    """A run this process drives: the watches other processes hold on it."""

    run: RunRecord
    watches: dict[str, LangGraphStream] = field(default_factory=dict)
    seq: int = 0


class PgRelay:
    """Runs shared through PostgreSQL (see the module docstring).

    Args:
        dsn: The database (``postgresql://...``).
        follow_patience: Seconds a run of another process is followed while
            the database is unreachable; then it ends here as an error.

    Raises:
        ConfigurationError: ``dsn`` is not a connection string, or a bad patience.
    """

    shared = True

    def __init__(self, dsn: str, *, follow_patience: float = FOLLOW_PATIENCE) -> None:
        self._patience = patience(follow_patience)
        self._db = runs_database(dsn)
        self._link = Listening(self._db, CHANNEL, self._notified, self._connected)
        self._unwritten: list[_Write] = []
        self._owned: dict[str, _Owned] = {}
        self._followed: dict[str, Followed] = {}
        self._mirrors = LogMirrors(self._db, self._check_up, self._spawn, patience=self._patience)
        self._on_cancel: CancelHandler | None = None
        self._owner: tuple[int, Any] | None = None
        # Made when served: a relay made only to check its options holds nothing.
        self._send: MemoryObjectSendStream[_Write] | None = None
        self._flushed = anyio.Event()
        self._tg: TaskGroup | None = None

    async def serve(
        self, on_cancel: CancelHandler, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the database, listen, and write what runs report, until cancelled."""
        self._on_cancel = on_cancel
        self._send, receive = anyio.create_memory_object_stream[_Write](math.inf)
        try:
            await open_runs_db(self._db)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self._link.run)
                # Runs of processes that died while this one was not running.
                await run_ops(
                    self._db, [(MARK_LOST.format(where="TRUE"), (jsonb(LOST), time.time()))]
                )
                task_status.started()
                tg.start_soon(self._sweep)
                await self._write(receive)
                tg.cancel_scope.cancel()  # the writer ended: shutting down
        finally:
            self._send.close()
            receive.close()
            with anyio.CancelScope(shield=True):
                await self._db.aclose()

    async def _connected(self, pid: int) -> None:
        """Listening (again), on the connection of backend ``pid``: this process's mark."""
        rows = await run_ops(
            self._db, [("SELECT backend_start FROM pg_stat_activity WHERE pid = %s", (pid,))]
        )
        again, self._owner = self._owner is not None, (pid, rows[0][0])
        if not again:
            return
        # Back after the database restarted: the runs still going are this
        # connection's now (the old one is gone, which says "lost"), and the
        # final statuses that could not be written are written, in one
        # transaction, before the relay says it is up (and so before another
        # process, told so by its /ready, looks at them).
        unwritten, self._unwritten = self._unwritten, []
        ops: list[Op] = [w.op for w in unwritten]
        if self._owned:
            ops.append(
                (
                    "UPDATE deepactors_runs SET owner_pid = %s, owner_start = %s"
                    " WHERE run_id = ANY(%s)",
                    (*self._owner, list(self._owned)),
                )
            )
        runs = dict.fromkeys(w.notify for w in unwritten if w.notify is not None)
        ops.extend(("SELECT pg_notify(%s, %s)", (CHANNEL, f"r:{r}")) for r in runs)
        if not ops:
            return
        try:
            await run_ops(self._db, ops)
        except PersistenceError as exc:
            if isinstance(exc.__cause__, psycopg.OperationalError):
                self._unwritten[:0] = unwritten  # lost again: for the next time
                raise
            # Refused for what they hold: never retried, or no reconnection
            # would ever succeed.
            _log.error("run relay: statuses kept through an outage not written", error=repr(exc))
        except BaseException:
            self._unwritten[:0] = unwritten
            raise

    def not_ready(self) -> str | None:
        """Why runs cannot be shared now (the database is unreachable), or None."""
        state = self._link.state
        return None if state.up else state.describe()

    def _check_up(self) -> None:
        """Fail at once while the database is unreachable, rather than wait for the pool.

        Raises:
            DatabaseUnavailable: Naming the database, since when and why.
        """
        state = self._link.state
        if not state.up:
            raise DatabaseUnavailable(state.describe(), location=state.location, since=state.since)

    async def aclose(self) -> None:
        """Write the status changes still pending (bounded wait)."""
        if self._send is None:
            return
        self._send.close()
        with anyio.move_on_after(5):
            await self._flushed.wait()

    # -- the owner's side ------------------------------------------------------------

    async def created(self, run: RunRecord) -> None:
        assert self._owner is not None, "serve() first"
        self._check_up()
        # Owned before it is visible: a watch may be asked for the moment it is.
        self._owned[run.run_id] = _Owned(run)
        try:
            await self._committed(
                f"INSERT INTO deepactors_runs ({RUN_COLUMNS}, owner_pid, owner_start)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, %s, %s)",
                (
                    run.run_id,
                    run.thread.thread_id,
                    run.assistant.graph_id,
                    run.status,
                    jsonb(run.metadata),
                    jsonb(run.kwargs),
                    run.multitask_strategy,
                    run.created_at,
                    time.time(),
                    *self._owner,
                ),
            )
        except BaseException:
            self._owned.pop(run.run_id, None)
            raise

    def started(self, run: RunRecord) -> None:
        # Only over "pending": written late (kept through an outage), it must
        # not undo a final status written since.
        self._queue(
            "UPDATE deepactors_runs SET status = %s, updated_at = %s"
            " WHERE run_id = %s AND status = 'pending'",
            (run.status, run.updated_at, run.run_id),
            run.run_id,
            keep=True,
        )

    def event(self, run: RunRecord, event: Event) -> None:
        owned = self._owned.get(run.run_id)
        if owned is None or not owned.watches:
            return
        for watch_id, adapter in owned.watches.items():
            frame = part_frames(adapter.feed(event))
            if frame:
                owned.seq += 1
                self._queue(
                    "INSERT INTO deepactors_run_events (run_id, seq, watch_id, frame)"
                    " VALUES (%s, %s, %s, %s)",
                    (run.run_id, owned.seq, watch_id, frame.decode()),
                    run.run_id,
                )

    def finished(self, run: RunRecord, values: JSONObject) -> None:
        self._owned.pop(run.run_id, None)
        self._queue(
            "UPDATE deepactors_runs SET status = %s, result = %s, updated_at = %s"
            " WHERE run_id = %s",
            (run.status, jsonb(values), run.updated_at, run.run_id),
            run.run_id,
            keep=True,
        )
        self._queue("DELETE FROM deepactors_run_watches WHERE run_id = %s", (run.run_id,), None)

    def log_sink(self, run: RunRecord) -> LogSink | None:
        return None if run.thread.temporary else RunLogSink(self._queue, run.run_id)

    async def _committed(self, sql: str, params: tuple[Any, ...]) -> None:
        """Write through the writer, and wait until committed.

        Creating runs and threads must be durable before the reply, but a burst
        of them (1,000 clients at once) then costs a few transactions, not one
        round trip each through a small pool.

        Raises:
            PersistenceError: The batch it was written in failed.
        """
        self._check_up()
        commit = _Commit()
        self._queue(sql, params, None, commit)
        await commit.done.wait()
        if commit.error is not None:
            raise commit.error

    def _queue(
        self,
        sql: str,
        params: Any,
        notify: str | None,
        commit: _Commit | None = None,
        *,
        keep: bool = False,
    ) -> None:
        try:
            if self._send is None:
                raise anyio.ClosedResourceError
            self._send.send_nowait(_Write((sql, params), notify, commit, keep))
        except anyio.ClosedResourceError:
            _log.warning("run relay closed: a run's change is not shared", sql=sql[:40])
            if commit is not None:
                commit.error = ConfigurationError("the run relay is closed (shutting down)")
                commit.done.set()

    async def _write(self, receive: MemoryObjectReceiveStream[_Write]) -> None:
        """Write queued changes in batches (one transaction, one notify per run)."""
        try:
            async with receive:
                async for first in receive:
                    batch = [first]
                    while True:
                        try:
                            batch.append(receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    ops = [w.op for w in batch]
                    runs = dict.fromkeys(w.notify for w in batch if w.notify is not None)
                    ops.extend(("SELECT pg_notify(%s, %s)", (CHANNEL, f"r:{r}")) for r in runs)
                    error: Exception | None = None
                    try:
                        self._check_up()
                        await run_ops(self._db, ops)
                    except Exception as exc:  # the runs go on; their followers time out
                        if self._link.state.up:  # else the outage is logged once, not here
                            _log.error("run relay write failed", error=repr(exc))
                        self._unwritten.extend(w for w in batch if w.keep)
                        error = exc
                    for write in batch:
                        if write.commit is not None:
                            write.commit.error = error
                            write.commit.done.set()
        finally:
            self._flushed.set()

    async def _sweep(self) -> None:
        """Now and then, delete the frames and logs of runs that ended a while ago."""
        while True:
            await anyio.sleep(FRAMES_KEPT / 5)
            ended_before = (time.time() - FRAMES_KEPT,)
            for table in ("deepactors_run_events", "deepactors_run_log"):
                self._queue(SWEEP_ENDED.format(table=table), ended_before, None)

    def _notified(self, payload: str) -> None:
        kind, _, rest = payload.partition(":")
        if kind == "r":
            followed = self._followed.get(rest)
            if followed is not None:
                followed.wake.set()
            self._mirrors.notified(rest)
        elif kind == "w" and rest in self._owned:
            self._spawn(self._load_watches, rest)
        elif kind == "c":
            run_id, _, action = rest.partition(":")
            if run_id in self._owned and self._on_cancel is not None:
                self._on_cancel(run_id, action)

    def _spawn(self, fn: Any, *args: Any) -> None:
        if self._tg is not None:
            self._tg.start_soon(fn, *args)

    async def _load_watches(self, run_id: str) -> None:
        owned = self._owned.get(run_id)
        if owned is None:
            return
        try:
            rows = await run_ops(
                self._db,
                [
                    (
                        "SELECT watch_id, modes, subgraphs FROM deepactors_run_watches"
                        " WHERE run_id = %s",
                        (run_id,),
                    )
                ],
            )
        except Exception as exc:
            _log.error("run relay: reading watches failed", run_id=run_id, error=repr(exc))
            return
        for watch_id, modes, subgraphs in rows:
            if watch_id not in owned.watches:
                owned.watches[watch_id] = LangGraphStream(
                    modes, subgraphs=subgraphs, thread_id=owned.run.thread.name
                )

    # -- a follower's side -----------------------------------------------------------

    async def find(self, run_id: str) -> SharedRun | None:
        self._check_up()
        rows = await run_ops(
            self._db,
            [
                (MARK_LOST.format(where="run_id = %s"), (jsonb(LOST), time.time(), run_id)),
                (f"SELECT {RUN_COLUMNS} FROM deepactors_runs WHERE run_id = %s", (run_id,)),
            ],
        )
        return shared_run(rows[0]) if rows else None

    async def thread_created(self, thread_id: str, metadata: dict[str, object]) -> None:
        await self._committed(
            "INSERT INTO deepactors_threads (thread_id, metadata, created_at)"
            " VALUES (%s, %s, %s) ON CONFLICT (thread_id) DO NOTHING",
            (thread_id, jsonb(metadata), time.time()),
        )

    async def thread_deleted(self, thread_id: str) -> None:
        self._check_up()
        await run_ops(
            self._db,
            [
                ("DELETE FROM deepactors_threads WHERE thread_id = %s", (thread_id,)),
                ("DELETE FROM deepactors_runs WHERE thread_id = %s", (thread_id,)),
            ],
        )

    async def find_thread(self, thread_id: str) -> SharedThread | None:
        self._check_up()
        made = await run_ops(
            self._db,
            [
                (
                    "SELECT metadata, created_at FROM deepactors_threads WHERE thread_id = %s",
                    (thread_id,),
                )
            ],
        )
        rows = await run_ops(
            self._db,
            [
                (
                    f"SELECT {RUN_COLUMNS} FROM deepactors_runs WHERE thread_id = %s"
                    " ORDER BY created_at",
                    (thread_id,),
                )
            ],
        )
        runs = [shared_run(r) for r in rows]
        if not made and not runs:
            return None
        metadata, created_at = made[0] if made else ({}, runs[0].created_at)
        return SharedThread(
            thread_id=thread_id, metadata=metadata, created_at=created_at, runs=runs
        )

    async def log_of(self, run: RunRecord, max_bytes: int) -> FrameLog | None:
        return await self._mirrors.log_of(run, max_bytes)

    async def cancel(self, run_id: str, action: str) -> None:
        self._check_up()
        await run_ops(self._db, [("SELECT pg_notify(%s, %s)", (CHANNEL, f"c:{run_id}:{action}"))])

    async def watch(
        self,
        run: RunRecord,
        stream: MemoryObjectSendStream[Event | bytes],
        modes: GivenModes,
        subgraphs: bool,
    ) -> None:
        self._check_up()
        followed = self._followed.setdefault(run.run_id, Followed())
        watch_id = new_uuid()
        followed.streams[watch_id] = stream
        await run_ops(
            self._db,
            [
                (
                    "INSERT INTO deepactors_run_watches (run_id, watch_id, modes, subgraphs)"
                    " VALUES (%s, %s, %s, %s)",
                    (run.run_id, watch_id, jsonb(modes), subgraphs),
                ),
                ("SELECT pg_notify(%s, %s)", (CHANNEL, f"w:{run.run_id}")),
            ],
        )

    async def follow(self, run: RunRecord) -> None:
        followed = self._followed.setdefault(run.run_id, Followed())
        try:
            await follow_run(self._db, run, followed, self._check_up, patience=self._patience)
        finally:
            self._followed.pop(run.run_id, None)
            for stream in followed.streams.values():
                stream.close()
            run.done.set()

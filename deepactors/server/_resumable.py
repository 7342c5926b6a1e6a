"""Resumable streams: ``stream_resumable`` runs, and ``Last-Event-ID`` to pick one up again.

A run streamed with ``stream_resumable: true`` (useStream sends it, with
``on_disconnect: "continue"``, so a reloaded page rejoins its run) has its SSE
frames kept in a :class:`~._responses.FrameLog`, numbered, by a task of the
app's task group that listens to the run from its creation: every frame is
kept whether or not a client is connected. Each frame goes out with its
``id:`` line, and ``GET /threads/{id}/runs/{run_id}/stream`` with a
``Last-Event-ID`` header sends the frames after that id, then the rest live
(``-1``: from the first; no header: from now on, as LangGraph's server does).

A run's frames are kept as long as its record is (they are keyed by it,
weakly): the server's retention of finished runs bounds them, and a run keeps
at most ``stream_log_bytes`` of them (the oldest are dropped past it, and a
client asking for one of those is told: see ``_frame_log``). With a runs
database (``--workers``), the log is copied there as it grows (``_pg_log``), and
a rejoin that reaches another process is served from a copy of it. The frames
are in the run's stream modes, whatever ``stream_mode`` a rejoining client names.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.exceptions import HTTPException

from .._core.jsonvalue import JSONValue
from ..events import Event
from ..langchain.views import LangGraphStream
from ._frames import metadata_frame, part_frame, sse_frame
from ._records import RunRecord, Subscriber, ThreadRecord
from ._responses import LoggedStreamResponse
from ._runs import RunManager
from ._schemas import RunCreate
from .relay import FrameLog, dropped_error

__all__ = ["create_logged", "join_logged", "kept_log", "open_resumable"]

_logs: weakref.WeakKeyDictionary[RunRecord, FrameLog] = weakref.WeakKeyDictionary()


async def kept_log(manager: RunManager, run: RunRecord) -> FrameLog | None:
    """The kept frames of a run streamed resumably (None: any other run).

    A run of another process (``--workers``) has them in the runs database:
    this process keeps a copy of them up to date while it is asked for.

    Raises:
        PersistenceError: The runs database is unreachable.
    """
    log = _logs.get(run)
    if log is None and run.remote and run.kwargs.get("stream_resumable"):
        log = await manager.relay.log_of(run, manager.stream_log_bytes)
        if log is not None:
            log = _logs.setdefault(run, log)
    return log


async def create_logged(
    manager: RunManager,
    thread: ThreadRecord,
    body: RunCreate,
    adapter: LangGraphStream,
    *,
    finish: Callable[[RunRecord], Awaitable[JSONValue]],
    launch: bool,
) -> tuple[RunRecord, FrameLog]:
    """Create a resumable run on ``thread``, its frames kept from its first.

    Args:
        finish: Awaited once the run has ended: the ``error`` event's data, if any.
        launch: Start it now (else :meth:`RunManager.launch` starts it).
    """
    send, receive = anyio.create_memory_object_stream[Event | bytes](float("inf"))
    try:
        run = await manager.create(
            thread, body, subscriber=Subscriber(send, body.stream_subgraphs), launch=False
        )
    except BaseException:
        send.close()
        receive.close()
        raise
    log = FrameLog(max_bytes=manager.stream_log_bytes, sink=manager.relay.log_sink(run))
    log.append(metadata_frame(run.run_id))
    _logs[run] = log
    # The app's task group keeps the frames coming after the client has gone.
    manager.start_soon(_keep, log, receive, adapter, finish, run)
    if launch:
        manager.launch(run)
    return run, log


async def open_resumable(
    manager: RunManager,
    thread: ThreadRecord,
    body: RunCreate,
    adapter: LangGraphStream,
    *,
    finish: Callable[[RunRecord], Awaitable[JSONValue]],
    headers: Callable[[RunRecord], Mapping[str, str]],
    on_disconnect: Callable[[RunRecord], None],
) -> LoggedStreamResponse:
    """Create a resumable run on ``thread`` and the response streaming its frames.

    Args:
        finish: Awaited once the run has ended: the ``error`` event's data, if any.
        headers: The response's extra headers for the run (``Location``...).
        on_disconnect: Called with the run when the client leaves early.
    """
    run, log = await create_logged(manager, thread, body, adapter, finish=finish, launch=False)
    return LoggedStreamResponse(
        log,
        start=0,
        on_disconnect=lambda: on_disconnect(run),
        headers=headers(run),
        launch=lambda: manager.launch(run),
    )


async def _keep(
    log: FrameLog,
    events: MemoryObjectReceiveStream[Event | bytes],
    adapter: LangGraphStream,
    finish: Callable[[RunRecord], Awaitable[JSONValue]],
    run: RunRecord,
) -> None:
    try:
        async with events:
            async for item in events:
                if isinstance(item, bytes):  # a relayed run's frames: not kept apart
                    log.append(item)
                    continue
                for part in adapter.feed(item):
                    log.append(part_frame(part))
        error = await finish(run)
        if error is not None:
            log.append(sse_frame("error", error))
    finally:
        log.close()


def join_logged(
    log: FrameLog, last_event_id: str | None, on_disconnect: Callable[[], None]
) -> LoggedStreamResponse:
    """The response to a rejoin of a resumable run: the frames after ``last_event_id``.

    Raises:
        HTTPException: 422 for a ``Last-Event-ID`` that is no id this server sent;
            410 when the frames after it were dropped (the log's byte limit).
    """
    if last_event_id is None:
        start = log.end
    else:
        try:
            start = int(last_event_id) + 1
        except ValueError:
            raise HTTPException(
                422, f"Last-Event-ID: an id of this run's stream, not {last_event_id!r}"
            ) from None
        start = max(start, 0)
        if start < log.first:
            raise HTTPException(410, dropped_error(log.first, log.max_bytes)["message"])
    return LoggedStreamResponse(log, start=start, on_disconnect=on_disconnect)

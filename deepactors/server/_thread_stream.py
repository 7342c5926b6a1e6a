"""``GET /threads/{thread_id}/stream`` (``threads.join_stream``): a thread's runs as they happen.

One response follows every run of the thread, those in flight when it joins
and those started after, until the client leaves or the thread is deleted,
as LangGraph's server does. Its ``stream_mode`` (one or several; LangGraph's
server reads ``stream_modes``, comma-separated, which is taken too) picks:

- ``run_modes`` (the default): each run's own stream, in the stream modes the
  run was started with (``values`` when none), opened by its ``metadata``
  event (``run_id``, ``attempt``) and closed by ``metadata``
  ``{"status": "run_done", "run_id": ...}``, with its ``error`` event between
  if it failed;
- ``lifecycle``: only those two ``metadata`` events of each run;
- ``state_update``: ``{"state": <the thread's state>, "thread_id": ...}`` each
  time the state is updated through ``POST /threads/{id}/state``.

Runs of other server processes (``--workers``) are not seen by a join to this
one, so with a runs database the endpoint says so (501) rather than leave them
out. A join has no ``Last-Event-ID``: a run's own stream
(``stream_resumable``) is the resumable one.

A client too slow to read what its join is sent loses the join (the stream
ends with an ``error`` event), not the server's memory: its queue is bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..events import Event
from ..langchain.views import LangGraphStream
from ._frames import error_event, metadata_frame, part_frames, sse_frame
from ._records import RunRecord, StateUpdated, ThreadRecord, ThreadStreamMode
from ._responses import _watched, send_batched, start_event_stream
from ._runs import RunManager
from ._wire_json import GivenModes

__all__ = ["JOIN_QUEUE", "thread_stream_routes"]

JOIN_QUEUE = 10_000
"""Frames a join may have queued for its client at most: past it, the client is
not reading, and its join ends (every run's events still go to other clients)."""

_MODES: tuple[str, ...] = get_args(ThreadStreamMode)

_TOO_SLOW = (
    f"this join of the thread's stream had {JOIN_QUEUE:,} events unread: it ended; "
    "join again (the runs go on)"
)


def _modes(request: Request) -> list[str]:
    """The join's modes: ``stream_mode`` repeated (the SDKs) or ``stream_modes``
    comma-separated (LangGraph's server); ``run_modes`` when none."""
    query = request.query_params
    raw = [*query.getlist("stream_mode"), *query.getlist("stream_modes")]
    modes = [m.strip() for value in raw for m in value.split(",") if m.strip()]
    for mode in modes:
        if mode not in _MODES:
            raise HTTPException(
                422, f"stream_mode: {mode!r} is not a thread stream mode (one of {list(_MODES)})"
            )
    return modes or ["run_modes"]


async def join_thread_stream(request: Request) -> Response:
    """Follow every run of the thread (see the module docstring)."""
    manager: RunManager = request.app.state.runs
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    modes = _modes(request)
    if request.headers.get("last-event-id") is not None:
        raise HTTPException(
            422,
            "Last-Event-ID: a thread's stream is not resumable; join it again for what comes "
            "next, or rejoin a run's own stream (runs streamed with stream_resumable)",
        )
    if manager.relay.shared:
        raise HTTPException(
            501,
            "a thread's stream is not served with a runs database (--workers): another "
            "process's runs of the thread would be missing from it; join each run's stream",
        )
    return ThreadStreamResponse(manager, thread, modes)


class ThreadStreamResponse(Response):
    """The SSE response of a thread's join (see the module docstring)."""

    def __init__(self, manager: RunManager, thread: ThreadRecord, modes: Sequence[str]) -> None:
        self._manager = manager
        self._thread = thread
        self._runs = "run_modes" in modes
        self._lifecycle = self._runs or "lifecycle" in modes
        self._states = "state_update" in modes
        self._slow = False  # the client did not read: the join ends
        # A run made while the join starts is both in flight and told of:
        # followed once.
        self._followed: set[str] = set()
        self._scope: anyio.CancelScope | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await start_event_stream(send)
        await _watched(lambda: self._respond(send), receive, lambda: None)

    async def _respond(self, send: Send) -> None:
        frames, out = anyio.create_memory_object_stream[bytes](JOIN_QUEUE)
        news, watched = anyio.create_memory_object_stream[RunRecord | StateUpdated](JOIN_QUEUE)
        thread = self._thread
        thread.watchers.append(news)
        try:
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                for run in thread.inflight:
                    tg.start_soon(self._follow, run, frames.clone())
                tg.start_soon(self._dispatch, watched, frames, tg)
                await send_batched(out, send, bytes)
                tg.cancel_scope.cancel()
        finally:
            if news in thread.watchers:
                thread.watchers.remove(news)
            news.close()
        tail = b""
        if self._slow:
            error = {"error": "TooSlow", "message": _TOO_SLOW}
            tail = sse_frame("error", error)
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    async def _dispatch(
        self,
        watched: MemoryObjectReceiveStream[RunRecord | StateUpdated],
        frames: MemoryObjectSendStream[bytes],
        tg: TaskGroup,
    ) -> None:
        """New runs and state updates of the thread, as they come (ends with the thread)."""
        async with watched, frames:
            async for item in watched:
                if isinstance(item, StateUpdated):
                    if self._states:
                        data = {"state": item.state, "thread_id": self._thread.name}
                        await self._put(frames, sse_frame("state_update", data))
                else:
                    tg.start_soon(self._follow, item, frames.clone())
        # The thread was deleted (its watchers closed): the stream ends once
        # the runs it follows have.

    async def _follow(self, run: RunRecord, frames: MemoryObjectSendStream[bytes]) -> None:
        """One run's frames, from now to its end."""
        async with frames:
            if run.run_id in self._followed:
                return
            self._followed.add(run.run_id)
            if self._lifecycle:
                await self._put(frames, metadata_frame(run.run_id))
            given = run.kwargs.get("stream_mode")  # (as RunCreate took it: one or a list)
            modes: GivenModes = (given if isinstance(given, str | list) else None) or "values"
            subgraphs = bool(run.kwargs.get("stream_subgraphs"))
            events = await self._manager.subscribe(run, modes=modes, subgraphs=subgraphs)
            adapter = LangGraphStream(modes, subgraphs=subgraphs, thread_id=self._thread.name)
            async with events:
                async for event in events:
                    if self._runs:
                        body = _frame(adapter, event)
                        if body:
                            await self._put(frames, body)
            await run.done.wait()
            if self._runs and (error := error_event(run.result, run.status)) is not None:
                await self._put(frames, sse_frame("error", error))
            if self._lifecycle:
                done = {"status": "run_done", "run_id": run.run_id}
                await self._put(frames, sse_frame("metadata", done))

    async def _put(self, frames: MemoryObjectSendStream[bytes], frame: bytes) -> None:
        try:
            frames.send_nowait(frame)
        except anyio.WouldBlock:
            self._slow = True  # JOIN_QUEUE frames unread: let this join go
            if self._scope is not None:
                self._scope.cancel()
        await anyio.lowlevel.checkpoint()


def _frame(adapter: LangGraphStream, event: Event | bytes) -> bytes:
    return event if isinstance(event, bytes) else part_frames(adapter.feed(event))


thread_stream_routes = [
    Route("/threads/{thread_id}/stream", join_thread_stream, methods=["GET"]),
]

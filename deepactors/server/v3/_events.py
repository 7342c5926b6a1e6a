"""``POST /threads/{thread_id}/stream/events``: a thread session's events, as SSE.

The body is the protocol's ``SubscribeParams`` and ``since``: ``channels``
(required), ``namespaces`` (prefixes) and ``depth`` (below them), ``since``
(the last ``seq`` the client has: the events the session still keeps after it
come first, then the new ones). Each frame's data is one protocol ``Event``.
The stream stays open (heartbeats while nothing happens) until the client
leaves or the thread is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._frames import sse_frame
from .._protocol_runs import manager_of, take_stream
from .._responses import _watched, send_batched, start_event_stream
from ._commands import sessions_of
from ._session import (
    CHANNELS,
    SESSION_EVENTS,
    STREAM_QUEUE,
    EventFilter,
    Listener,
    SessionEvent,
    ThreadSession,
)

__all__ = ["stream_events"]

_TOO_SLOW = (
    f"this event stream had {STREAM_QUEUE:,} events unread: it ended; open it again with "
    "since=<the last seq read> (the session keeps the last "
    f"{SESSION_EVENTS:,})"
)


def _filter(body: object) -> tuple[EventFilter, int | None]:
    """The body's filter and ``since``.

    Raises:
        HTTPException: 400, a bad body (what is wrong, said).
    """
    if not isinstance(body, dict):
        raise HTTPException(
            400, "the body is a JSON object: {channels, namespaces?, depth?, since?}"
        )
    channels = body.get("channels")
    if not isinstance(channels, list) or not channels:
        raise HTTPException(400, "channels: a non-empty list of channel names")
    bad = [
        c
        for c in channels
        if not isinstance(c, str) or not (c in CHANNELS or (c.startswith("custom:") and c[7:]))
    ]
    if bad:
        known = ", ".join(sorted(CHANNELS))
        raise HTTPException(400, f"channels: unknown {bad!r}; known: {known}, custom:<name>")
    namespaces = body.get("namespaces")
    if namespaces is not None and not (
        isinstance(namespaces, list)
        and all(isinstance(ns, list) and all(isinstance(s, str) for s in ns) for ns in namespaces)
    ):
        raise HTTPException(400, "namespaces: a list of namespaces (each a list of strings)")
    depth, since = body.get("depth"), body.get("since")
    for name, value in (("depth", depth), ("since", since)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise HTTPException(400, f"{name}: a non-negative integer, not {value!r}")
    wanted = EventFilter(
        frozenset(channels),
        None if namespaces is None else tuple(tuple(ns) for ns in namespaces),
        depth,
    )
    return wanted, since


async def stream_events(request: Request) -> Response:
    """Open an event stream of the thread's session (see the module docstring)."""
    manager = manager_of(request)
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise HTTPException(400, "the body is not JSON") from None
    wanted, since = _filter(body)
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    if manager.relay.shared:
        raise HTTPException(
            501,
            "a thread's event stream is not served with a runs database (--workers): another "
            "process's runs of the thread would be missing from it; stream each run instead "
            "(runs.stream / runs.join_stream)",
        )
    release = take_stream(request)
    try:
        session = sessions_of(request).of(thread)
        try:
            listener = session.listen(wanted, since)
        except ValueError as exc:
            raise HTTPException(409, str(exc)) from None
    except BaseException:
        release()
        raise
    return _EventStream(session, listener, release)


class _EventStream(Response):
    """The SSE response of one event stream."""

    def __init__(
        self, session: ThreadSession, listener: Listener, release: Callable[[], None]
    ) -> None:
        self._session = session
        self._listener = listener
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await start_event_stream(send)
            await _watched(lambda: self._write(send), receive, lambda: None)
        finally:
            self._session.leave(self._listener)
            self._release()

    async def _write(self, send: Send) -> None:
        """Send the events as they come, then the end (and why, if the client was too slow)."""
        await send_batched(self._listener.receive, send, _frame)
        tail = b""
        if self._listener.too_slow:
            tail = sse_frame("error", {"error": "TooSlow", "message": _TOO_SLOW})
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def _frame(event: SessionEvent) -> bytes:
    return f"id: {event['seq']}\r\n".encode() + sse_frame(event["method"], event)

"""ASGI responses that watch the client: a run's SSE stream, and a wait for its result.

A resumable run's stream (:class:`LoggedStreamResponse`) is sent from the
frames kept for it (:class:`FrameLog`, numbered, with ``id:`` lines), so a
client that comes back with ``Last-Event-ID`` gets what it missed.

Both are plain ASGI callables (not async generators): the response's own task
group holds a watcher that reads ``http.disconnect`` while the body is sent, so
a client that leaves is noticed at once, even while no event is due, and the
run it was following can be cancelled (``on_disconnect``). Events come in
through a memory object stream fed by the run's driver task, which the
server's task group owns; nothing here owns a scope across a ``yield``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from .._core.jsonvalue import JSONValue
from .._core.logs import get_logger
from .._core.pacing import Pacer
from ..errors import DatabaseUnavailable, DeepActorsError, InputError
from ..events import Event
from ..langchain.views import LangGraphStream
from ._frames import metadata_frame, part_frames, sse_frame
from .auth import AuthError
from .relay import FrameLog, dropped_error

__all__ = [
    "EventSourceResponse",
    "LoggedStreamResponse",
    "WaitResponse",
    "error_response",
    "send_batched",
    "start_event_stream",
]

T = TypeVar("T")

_log = get_logger("deepactors.server")

HEARTBEAT = 15.0
"""Seconds of silence before a comment line keeps proxies from closing the stream."""

RETRY_AFTER = 5
"""Seconds a client is told to wait (``Retry-After``) while a database is unreachable:
the most the runs relay waits between reconnection attempts (``relay.backoff``),
so a retry after it finds the database back if it is."""


def error_response(exc: Exception, path: str) -> JSONResponse | None:
    """The JSON answer to an error the server reports to clients (None: any other).

    ``HTTPException``: its status; bad input (:class:`InputError`): 422; a
    database out of reach (:class:`DatabaseUnavailable`): 503 with
    ``Retry-After``, not logged here (the outage is logged once, where it is
    noticed); any other error of ours: 500 naming it (and logged), as a ``detail``.
    """
    if isinstance(exc, HTTPException):
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )
    if isinstance(exc, InputError):
        return JSONResponse({"detail": str(exc)}, status_code=422)
    if isinstance(exc, AuthError):
        return auth_error_response(exc)
    if isinstance(exc, DatabaseUnavailable):
        return JSONResponse(
            {"detail": f"{type(exc).__name__}: {exc}"},
            status_code=503,
            headers={"retry-after": str(RETRY_AFTER)},
        )
    if isinstance(exc, DeepActorsError):
        _log.warning("request failed", path=path, error=repr(exc))
        return JSONResponse({"detail": f"{type(exc).__name__}: {exc}"}, status_code=500)
    return None


def auth_error_response(exc: AuthError, extra: Mapping[str, str] | None = None) -> JSONResponse:
    """401 (with the scheme to authenticate by) or 403, saying why.

    Args:
        exc: The refusal.
        extra: More headers (``Connection: close`` when the body is left unread).
    """
    headers = {"www-authenticate": "Bearer"} if exc.status == 401 else {}
    return JSONResponse(
        {"detail": str(exc)}, status_code=exc.status, headers={**headers, **(extra or {})}
    )


def _headers(extra: Mapping[str, str], content_type: bytes) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"content-type", content_type),
        (b"cache-control", b"no-store"),
        (b"x-accel-buffering", b"no"),
    ]
    headers.extend((k.lower().encode(), v.encode()) for k, v in extra.items())
    return headers


async def start_event_stream(send: Send) -> None:
    """Open a ``text/event-stream`` response (status 200, never cached or buffered)."""
    headers = _headers({}, b"text/event-stream; charset=utf-8")
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def send_batched(
    items: MemoryObjectReceiveStream[T], send: Send, frame: Callable[[T], bytes]
) -> None:
    """Send each item's frame as it comes, until ``items`` ends (the body stays open).

    What piled up meanwhile goes in the same write; a comment line goes out
    after :data:`HEARTBEAT` seconds without any, so proxies keep the stream.
    """
    async with items:
        while True:
            chunks: list[bytes] = []
            with anyio.move_on_after(HEARTBEAT):
                try:
                    chunks.append(frame(await items.receive()))
                except anyio.EndOfStream:
                    break
            while True:
                try:
                    chunks.append(frame(items.receive_nowait()))
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            body = b"".join(chunks) or b": heartbeat\r\n\r\n"
            await send({"type": "http.response.body", "body": body, "more_body": True})


async def _watched(
    respond: Callable[[], Awaitable[None]], receive: Receive, on_disconnect: Callable[[], None]
) -> None:
    """Run ``respond`` while watching for the client to leave; if it does (a
    disconnect message, or a write that fails), call ``on_disconnect`` once and
    stop ``respond``."""
    left = False

    def leave() -> None:
        nonlocal left
        if not left:
            left = True
            on_disconnect()

    async def watch(scope: anyio.CancelScope) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                leave()
                scope.cancel()
                return

    # The body is sent by the request's own task; only the watcher is a task
    # of its own (one spawn per response, not two: a burst of 1,000 streams
    # pays for each).
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, tg.cancel_scope)
        try:
            await respond()
        except OSError:
            leave()  # the server could not write: the client is gone
        tg.cancel_scope.cancel()


class EventSourceResponse(Response):
    """Streams one run's events as SSE in LangGraph's format.

    Args:
        events: The run's raw events (closed by the driver when the run ends),
            or SSE frames already rendered (a run followed in another process).
        adapter: Turns events into stream parts (modes, subgraphs).
        run_id: Sent first, as the ``metadata`` event.
        on_disconnect: Called once if the client leaves before the end.
        finish: Awaited after the last event; returns an ``error`` event's data
            when the run failed (sent last), else None.
        headers: Extra response headers (``Location``...).
        launch: Starts the run, once its first event is out (the run was
            created but not started); also called if the response ends
            before that. It must be idempotent.
        pacer: The runtime's pacer: after the first event, the rest (the
            run's start, the watcher) waits its turn behind the agents' steps.
    """

    def __init__(
        self,
        events: MemoryObjectReceiveStream[Event | bytes],
        adapter: LangGraphStream,
        *,
        run_id: str,
        on_disconnect: Callable[[], None],
        finish: Callable[[], Awaitable[JSONValue]],
        headers: Mapping[str, str] | None = None,
        launch: Callable[[], None] | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self._events = events
        self._adapter = adapter
        self._run_id = run_id
        self._on_disconnect = on_disconnect
        self._finish = finish
        self._extra = headers or {}
        self._launch = launch
        self._pacer = pacer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(self._extra, b"text/event-stream; charset=utf-8")

        async def respond() -> None:
            await self._send_events(send)

        try:
            # The headers and the metadata event go out at once, before the
            # watcher's task group starts (a task that would first wait its turn
            # behind every ready task of a busy loop).
            metadata = metadata_frame(self._run_id)
            try:
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": metadata, "more_body": True})
            except OSError:
                self._on_disconnect()  # the client is gone already
                return
            pacer = self._pacer
            if pacer is not None and pacer.due():
                # The client has its first event. Under a burst of requests the
                # rest (starting the run, spawning the watcher) waits its turn,
                # so the requests behind this one get their first events first.
                await pacer.wait()
            if self._launch is not None:
                self._launch()
            await _watched(respond, receive, self._on_disconnect)
        finally:
            if self._launch is not None:
                self._launch()  # never left created and not started
            self._events.close()

    def _frame(self, item: Event | bytes) -> bytes:
        return item if isinstance(item, bytes) else part_frames(self._adapter.feed(item))

    async def _send_events(self, send: Send) -> None:
        events = self._events
        async with events:
            ended = False
            chunks: list[bytes] = []
            while not ended:
                # Everything queued already goes out in one write: under load a
                # run's events pile up between two turns of this task, and one
                # write (one trip through the ASGI stack, one system call) for
                # them all costs little more than one for each.
                while True:
                    try:
                        chunks.append(self._frame(events.receive_nowait()))
                    except anyio.WouldBlock:
                        break
                    except anyio.EndOfStream:
                        ended = True
                        break
                body = b"".join(chunks)
                chunks.clear()
                if body:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                if ended:
                    break
                item: Event | bytes | None = None
                with anyio.move_on_after(HEARTBEAT):
                    try:
                        item = await events.receive()
                    except anyio.EndOfStream:
                        break
                # With whatever came in behind it, at the top of the loop.
                chunks.append(b": heartbeat\r\n\r\n" if item is None else self._frame(item))
        error = await self._finish()
        tail = sse_frame("error", error) if error is not None else b""
        await send({"type": "http.response.body", "body": tail, "more_body": False})


class WaitResponse(Response):
    """Waits for a run to end, then sends its final values (or ``__error__``) as JSON.

    Whitespace is sent while waiting (JSON parsers skip it), as LangGraph's
    server does, so idle connections are not cut by proxies.

    Args:
        result: Awaited for the body: the run's final values as JSON.
        on_disconnect: Called once if the client leaves before the end.
    """

    def __init__(
        self,
        result: Callable[[], Awaitable[JSONValue]],
        *,
        on_disconnect: Callable[[], None],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._result = result
        self._on_disconnect = on_disconnect
        self._extra = headers or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(self._extra, b"application/json")

        async def respond() -> None:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            value: JSONValue = None
            done = anyio.Event()

            async def wait() -> None:
                nonlocal value
                value = await self._result()
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                while not done.is_set():
                    with anyio.move_on_after(HEARTBEAT):
                        await done.wait()
                    if not done.is_set():
                        await send({"type": "http.response.body", "body": b"\n", "more_body": True})
            body = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=repr)
            await send({"type": "http.response.body", "body": body.encode(), "more_body": False})

        await _watched(respond, receive, self._on_disconnect)


class LoggedStreamResponse(Response):
    """Streams a resumable run's frames from its :class:`FrameLog`, with their ids.

    Args:
        log: The run's frames, kept whether or not a client is connected.
        start: The first frame to send (one past the client's ``Last-Event-ID``).
        on_disconnect: Called once if the client leaves before the end.
        headers: Extra response headers (``Location``...).
        launch: Starts the run, once the headers are out (idempotent; also
            called if the response ends before that).
    """

    def __init__(
        self,
        log: FrameLog,
        *,
        start: int,
        on_disconnect: Callable[[], None],
        headers: Mapping[str, str] | None = None,
        launch: Callable[[], None] | None = None,
    ) -> None:
        self._log = log
        self._start = start
        self._on_disconnect = on_disconnect
        self._extra = headers or {}
        self._launch = launch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(self._extra, b"text/event-stream; charset=utf-8")
        log = self._log

        async def respond() -> None:
            sent = self._start
            while True:
                if sent < log.first:  # dropped before this client was sent them
                    error = sse_frame("error", dropped_error(log.first, log.max_bytes))
                    await send({"type": "http.response.body", "body": error, "more_body": True})
                    break
                if sent < log.end:
                    body = b"".join(log.after(sent))
                    sent = log.end
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    continue
                if log.closed:
                    break
                with anyio.move_on_after(HEARTBEAT) as idle:
                    await log.wait_for(sent)
                if idle.cancelled_caught:
                    beat = b": heartbeat\r\n\r\n"
                    await send({"type": "http.response.body", "body": beat, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        try:
            try:
                await send({"type": "http.response.start", "status": 200, "headers": headers})
            except OSError:
                self._on_disconnect()
                return
            if self._launch is not None:
                self._launch()
            await _watched(respond, receive, self._on_disconnect)
        finally:
            if self._launch is not None:
                self._launch()

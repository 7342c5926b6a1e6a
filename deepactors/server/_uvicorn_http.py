"""uvicorn's HTTP protocol with a deadline on every request's head.

uvicorn arms its keep-alive timeout only after a response, and any byte that
arrives disarms it: a connection that sends nothing after opening, or sends
its headers a byte at a time, is never timed out (1,500 such sockets held a
server's file descriptors for as long as the clients liked, and its health
checks failed). Hypercorn's ``keep_alive_timeout`` already runs from a
connection's opening, and from each response's end, until the next request's
headers are complete; this does the same for uvicorn, with its
``timeout_keep_alive``, so both servers close such connections alike. A head
that grows past ``h11_max_incomplete_event_size`` (16 KiB by default, as
h11's, hence hypercorn's) is refused with 431: httptools sets no bound. A
request target that is not a path (``GET http://evil.example/info``) is
refused with 400: httptools hands the app the path alone, so the name in the
target would go unchecked (hypercorn gives the app the whole target, which the
app's guard refuses).
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ._guard import ORIGIN_FORM

__all__ = ["HEAD_LIMIT", "HeadTimeoutProtocol"]

HEAD_LIMIT = 16 * 1024
"""Bytes of a request's head when uvicorn's config sets no
``h11_max_incomplete_event_size`` (h11's default, hypercorn's too)."""

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 26\r\n"
    b"connection: close\r\n\r\nrequest headers too large\n"
)


class HeadTimeoutProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` whose keep-alive timeout also bounds a request's head.

    From a connection's opening, and from each response's end, the next
    request's headers must be complete within ``timeout_keep_alive`` seconds
    and ``h11_max_incomplete_event_size`` bytes, else the connection is closed.
    Pass the class as ``http=`` to ``uvicorn.Config``/``uvicorn.run``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: Any = None  # an asyncio.TimerHandle while a head is awaited
        self._head_bytes = 0
        self._in_body = False  # between a request's head and its last body byte
        self._head_limit = self.config.h11_max_incomplete_event_size or HEAD_LIMIT

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        # Not while the rest of a body refused early is still coming in: the
        # timer runs (it bounds that too), but those bytes are no head's.
        waiting = self._head_timer is not None and not self._in_body
        if waiting:
            self._head_bytes += len(data)
        super().data_received(data)
        # Still waiting after the parser had it all: the head alone is that long
        # (a chunk that completes a head and carries its body stops the timer).
        if (
            waiting
            and self._head_timer is not None
            and self._head_bytes > self._head_limit
            and not self.transport.is_closing()
        ):
            self._stop_waiting()
            self.transport.write(_TOO_LARGE)
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        self._in_body = True
        if self.url.startswith(b"/"):
            super().on_headers_complete()
            return
        # Answered by an app of its own, as uvicorn answers past its concurrency
        # limit: the request's body is read and the connection closed as usual.
        app, self.app = self.app, _not_origin_form
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def on_message_complete(self) -> None:
        self._in_body = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # No pipelined request started: the next one's head is awaited.
        if not self.transport.is_closing() and self.cycle.response_complete:
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._stop_waiting()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.timeout_keep_alive, self._head_timed_out)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


_NOT_ORIGIN_FORM = json.dumps({"detail": ORIGIN_FORM}).encode()


async def _not_origin_form(scope: Any, receive: Any, send: Any) -> None:
    """The 400 of a request whose target is not a path (see the module docstring)."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_NOT_ORIGIN_FORM)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": _NOT_ORIGIN_FORM})

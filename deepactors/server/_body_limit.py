"""A request's body, bounded in size and in time, and how the guard refuses a request.

The guard (``_guard``) hands the app a :class:`BoundedBody` as the request's
``receive``: it stops the body at ``max_body`` bytes (413) and at its deadline
(408), which the guard's one task keeps for every body being read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import anyio
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

__all__ = ["CLOSE", "TIMED_OUT", "BodyRefused", "BoundedBody", "refuse"]


class BodyRefused(HTTPException):
    """A body past its size or its time (413, 408): raised by the guarded ``receive``.

    An ``HTTPException``, so the app's own handlers answer it wherever the body is
    read; the guard answers it when nothing did (the stream endpoints' direct path).
    """


TIMED_OUT = "the body did not arrive in time"
CLOSE = {"Connection": "close"}  # what is left of the body is not read


class BoundedBody:
    """A request's ``receive`` that stops its body at ``max_body`` bytes and its deadline.

    Once the body is complete it is the server's ``receive`` again (a response's
    watcher waits on it for the client to leave, for as long as the run lasts).
    """

    __slots__ = (
        "_answered",
        "_done",
        "_expired",
        "_left",
        "_limit",
        "_receive",
        "_scope",
        "_send",
        "_waiting",
        "deadline",
    )

    def __init__(
        self, scope: Scope, receive: Receive, send: Send, *, max_body: int, timeout: float
    ) -> None:
        self._limit = max_body
        self._scope = scope
        self._receive = receive
        self._send = send
        self._left = max_body
        self.deadline = time.monotonic() + timeout
        self._done = self._expired = self._waiting = False
        self._answered: anyio.Event | None = None

    @property
    def answered(self) -> bool:
        """Whether the guard answered this request (408) while it waited for its body."""
        return self._answered is not None

    async def __call__(self) -> Message:
        if self._done:
            return await self._receive()
        if self._expired:
            self._done = True
            raise BodyRefused(408, TIMED_OUT, headers=CLOSE)
        self._waiting = True
        try:
            message = await self._receive()
        finally:
            self._waiting = False
        if self._answered is not None:
            self._done = True
            await self._answered.wait()  # the 408 is out: this request is over
            return {"type": "http.disconnect"}
        if message["type"] != "http.request":
            self._done = True  # the client left
            return message
        self._left -= len(message.get("body", b""))
        if self._left < 0:
            self._done = True
            limit = self._limit
            raise BodyRefused(413, f"the body is over the limit of {limit} bytes", headers=CLOSE)
        if not message.get("more_body", False):
            self._done = True
        return message

    def expire(self) -> bool:
        """Its deadline passed: True if the guard must answer (it waits in ``receive``)."""
        if self._done:
            return False
        self._expired = True
        if self._waiting:
            self._answered = anyio.Event()
            return True
        return False

    async def answer_timeout(self) -> None:
        """Answer 408 on the request's behalf (it waits in ``receive``: it sends nothing)."""
        assert self._answered is not None
        try:
            await refuse(408, TIMED_OUT, None, CLOSE)(self._scope, self._receive, self._send)
        except (OSError, RuntimeError):
            pass  # the client is gone, or the server closed the exchange itself
        finally:
            self._answered.set()


def refuse(
    status: int,
    detail: str,
    cors: Mapping[str, str] | None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The JSON answer ``{"detail": ...}`` the app's other errors have."""
    return JSONResponse(
        {"detail": detail}, status_code=status, headers={**(cors or {}), **(headers or {})}
    )

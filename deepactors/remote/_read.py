"""Reading a remote server's answers with bounds: a body's size, an event's size, the wait for one.

httpx reads a body whole (``response.content``, ``aread()``) and a line whole
(``aiter_lines``): a server's 100 MB event was held (273 MB at the peak)
before anything looked at it. Here bytes are counted as they arrive, and past
``max_answer_bytes`` the rest is not read. On an event stream, the time between
two events is bounded too (``idle_timeout``): heartbeats keep a connection
from looking silent, so a server that sends nothing else would otherwise hold
a child until the run's deadline (or for ever, with none).

A read given up on is cancelled (a cancel scope around it), not left: the
cancellation is raised inside httpx's own iterators, which end with it, where
leaving them at a ``yield`` would leave them to the garbage collector (trio
warns about each one).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import anyio
import httpx

__all__ = ["AnswerTooLarge", "NoEvents", "read_body", "read_events"]


class AnswerTooLarge(Exception):
    """An answer (a body, or one event) passed the cap; ``size`` bytes were seen."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class NoEvents(Exception):
    """An event stream went ``idle`` seconds without an event (heartbeats aside)."""


async def read_body(res: httpx.Response, cap: int) -> bytes:
    """The body of ``res``, read as it comes, at most ``cap`` bytes.

    Raises:
        AnswerTooLarge: It is longer (the rest is not read).
    """
    parts: list[bytes] = []
    size = 0
    with anyio.CancelScope() as scope:
        async for chunk in res.aiter_bytes():
            if scope.cancel_called:
                continue  # buffered already: the next read raises
            size += len(chunk)
            if size > cap:
                parts.clear()
                scope.cancel()
                continue
            parts.append(chunk)
    if size > cap:
        raise AnswerTooLarge(size)
    return b"".join(parts)


async def read_events(
    res: httpx.Response,
    on_event: Callable[[str, str], None],
    *,
    cap: int,
    idle: float | None,
) -> None:
    """Hand each event of the stream ``res`` to ``on_event(name, data)``, in order.

    Comments (heartbeats) and ids are skipped; an event's data lines are joined
    with newlines, and one the stream ends in the middle of is dropped, as the
    SSE spec says.

    Raises:
        AnswerTooLarge: An event (its lines as received) passed ``cap`` bytes.
        NoEvents: ``idle`` seconds went by without an event.
    """
    state = _Events(on_event, cap)
    wait = math.inf if idle is None else idle
    with anyio.CancelScope(deadline=anyio.current_time() + wait) as scope:
        async for chunk in res.aiter_bytes():
            if scope.cancel_called:
                continue
            if state.feed(chunk):
                scope.deadline = anyio.current_time() + wait
            if state.too_large is not None:
                scope.cancel()
    if state.too_large is not None:
        raise AnswerTooLarge(state.too_large)
    if scope.cancelled_caught:
        raise NoEvents()


class _Events:
    """The SSE framing: lines into events, no event kept past ``cap`` bytes."""

    def __init__(self, on_event: Callable[[str, str], None], cap: int) -> None:
        self._on_event = on_event
        self._cap = cap
        self._partial: list[bytes] = []
        self._size = 0  # bytes of the event so far, its partial line included
        self._name = ""
        self._data: list[str] = []
        self.too_large: int | None = None

    def feed(self, chunk: bytes) -> bool:
        """Take ``chunk``; whether it completed an event."""
        done = False
        start = 0
        while self.too_large is None:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._size += len(piece) + (end >= 0)
            if self._size > self._cap:
                self.too_large = self._size
                self._partial.clear()
                self._data.clear()
                return done
            if end < 0:
                if piece:
                    self._partial.append(piece)
                return done
            line = b"".join([*self._partial, piece]) if self._partial else piece
            self._partial.clear()
            done = self._line(line.rstrip(b"\r").decode("utf-8", "replace")) or done
            start = end + 1
        return done

    def _line(self, line: str) -> bool:
        if line:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                self._name = value
            elif field == "data":
                self._data.append(value)
            # (comments, heartbeats, ids, retry: nothing to do)
            return False
        name, data = self._name, self._data
        self._name, self._data, self._size = "", [], 0
        if not name and not data:
            return False  # a blank line after a heartbeat: no event
        self._on_event(name, "\n".join(data))
        return True

"""The numbered SSE frames of a resumable run, bounded (see ``_resumable``).

A :class:`FrameLog` keeps a run's frames, each with its ``id:`` line, so a
client that lost its connection asks for what came after the last id it saw
(``Last-Event-ID``) and gets exactly the frames it missed.

It holds at most ``max_bytes`` of frames. Past that, the oldest are dropped
(down to three quarters of the limit at once, so that dropping is rare), and
the log says so: :attr:`FrameLog.first` is the id of the oldest frame kept. A
client that asks for a dropped frame is told, never served a stream with a hole
in it: a rejoin gets 410 naming what was dropped, and a stream still connected
whose next frame was dropped under it ends with an ``error`` event that says so.

A log may tell a :class:`LogSink` what it keeps, drops and when it ends: the
runs database (``_pg_log``) keeps a copy there, so that any server process can
serve a rejoin.
"""

from __future__ import annotations

from typing import Protocol

import anyio

__all__ = ["DEFAULT_STREAM_LOG_BYTES", "FrameLog", "LogSink", "dropped_error"]

DEFAULT_STREAM_LOG_BYTES = 64 * 1024 * 1024
"""Bytes of SSE frames a resumable run keeps (per run) before dropping the oldest."""


class LogSink(Protocol):
    """Where a log's changes are copied (the runs database)."""

    def kept(self, number: int, frame: bytes) -> None:
        """Frame ``number`` (without its ``id:`` line) was kept."""
        ...

    def dropped(self, first: int) -> None:
        """The frames before ``first`` were dropped."""
        ...

    def ended(self, end: int) -> None:
        """No frame comes after ``end - 1``."""
        ...


def dropped_error(first: int, max_bytes: int) -> dict[str, str]:
    """What a client is told when the frames it asked for were dropped."""
    return {
        "error": "EventsDropped",
        "message": (
            f"events before id {first} of this run are no longer kept (a run keeps at most "
            f"{max_bytes} bytes of events: serve --stream-log-bytes); rejoin with a "
            f"Last-Event-ID of {first - 1} or later, or with none to follow from now"
        ),
    }


class FrameLog:
    """The SSE frames of one resumable run, numbered from 0 as they are made.

    Args:
        max_bytes: The most bytes of frames kept; past it the oldest are dropped.
        sink: Told of each frame kept, of drops and of the end.

    Raises:
        ValueError: ``max_bytes`` is not positive.
    """

    def __init__(self, *, max_bytes: int = DEFAULT_STREAM_LOG_BYTES, sink: LogSink | None = None):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes: a positive number of bytes, not {max_bytes!r}")
        self.max_bytes = max_bytes
        self.first = 0
        """The id of the oldest frame kept."""
        self.closed = False
        self._frames: list[bytes] = []
        self._size = 0
        self._sink = sink
        self._more = anyio.Event()

    @property
    def end(self) -> int:
        """The id the next frame will have (one past the last kept)."""
        return self.first + len(self._frames)

    def after(self, start: int) -> list[bytes]:
        """The frames from id ``start`` on (``start`` must not be below :attr:`first`)."""
        assert start >= self.first, "frames dropped: check first"
        return self._frames[start - self.first :]

    def append(self, frame: bytes) -> None:
        """Keep one frame (``event:``/``data:`` lines), numbered next."""
        number = self.end
        if self._sink is not None:
            self._sink.kept(number, frame)
        self._put(number, frame)

    def put(self, number: int, frame: bytes) -> None:
        """Keep a frame another log numbered (a copy of a log of another process):
        frames before ``number`` that this log never had count as dropped."""
        if number < self.end:
            return  # had it already
        if number > self.end:
            self._frames.clear()
            self._size = 0
            self.first = number
        self._put(number, frame)

    def _put(self, number: int, frame: bytes) -> None:
        kept = b"id: %d\r\n" % number + frame
        self._frames.append(kept)
        self._size += len(kept)
        if self._size > self.max_bytes:
            self._drop()
        self._wake()

    def _drop(self) -> None:
        # Down to three quarters at once: a drop (and its DELETE in the runs
        # database) every so many frames, not one per frame.
        goal, size, count = self.max_bytes * 3 // 4, self._size, 0
        while size > goal and count < len(self._frames) - 1:  # the newest is kept
            size -= len(self._frames[count])
            count += 1
        del self._frames[:count]
        self._size, self.first = size, self.first + count
        if self._sink is not None:
            self._sink.dropped(self.first)

    def close(self) -> None:
        """The run has ended: no frame comes after the ones kept."""
        if self.closed:
            return
        self.closed = True
        if self._sink is not None:
            self._sink.ended(self.end)
        self._wake()

    async def wait_for(self, count: int) -> None:
        """Wait until a frame with id ``count`` or later is kept, or the log is closed."""
        while self.end <= count and not self.closed:
            await self._more.wait()

    def _wake(self) -> None:
        # One event per change, replaced before it is set: a waiter that wakes
        # looks again and waits on the new one.
        more, self._more = self._more, anyio.Event()
        more.set()

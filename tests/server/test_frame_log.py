"""A resumable run's frame log keeps its newest frames within its byte limit, and
says so when a client asks for (or is being sent) frames it dropped."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest

from deepactors.server._responses import LoggedStreamResponse
from deepactors.server.relay import FrameLog


class _Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def kept(self, number: int, frame: bytes) -> None:
        self.calls.append(("kept", number))

    def dropped(self, first: int) -> None:
        self.calls.append(("dropped", first))

    def ended(self, end: int) -> None:
        self.calls.append(("ended", end))


def _frame(i: int) -> bytes:
    return b"event: custom\r\ndata: %03d\r\n\r\n" % i


def test_past_its_limit_a_log_drops_its_oldest_frames_and_says_from_where() -> None:
    sink = _Sink()
    size = len(b"id: 00\r\n" + _frame(0))
    log = FrameLog(max_bytes=10 * size, sink=sink)
    for i in range(11):
        log.append(_frame(i))
    # Down to three quarters at once: the newest are kept, numbered as they were.
    assert log.first == 4
    assert log.end == 11
    assert log.after(9) == [b"id: 9\r\n" + _frame(9), b"id: 10\r\n" + _frame(10)]
    assert ("dropped", 4) in sink.calls
    assert [c for c in sink.calls if c[0] == "kept"] == [("kept", i) for i in range(11)]
    log.close()
    log.close()
    assert sink.calls[-1] == ("ended", 11)
    assert sink.calls.count(("ended", 11)) == 1


def test_a_copy_of_a_log_counts_frames_it_never_had_as_dropped() -> None:
    log = FrameLog()
    log.put(5, _frame(5))
    log.put(5, _frame(5))  # had it
    log.put(6, _frame(6))
    assert (log.first, log.end) == (5, 7)
    log.put(9, _frame(9))
    assert (log.first, log.end) == (9, 10)


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        FrameLog(max_bytes=0)


async def test_a_client_whose_next_frames_were_dropped_is_told_so() -> None:
    size = len(b"id: 00\r\n" + _frame(0))
    log = FrameLog(max_bytes=4 * size)
    log.append(_frame(0))
    sent: list[bytes] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])
            if len(sent) == 1:  # while this client is sent frame 0, 20 more come
                for i in range(1, 21):
                    log.append(_frame(i))

    async def receive() -> MutableMapping[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    response = LoggedStreamResponse(log, start=0, on_disconnect=lambda: None)
    with anyio.fail_after(5):
        await response({"type": "http"}, receive, send)
    assert sent[0].startswith(b"id: 0\r\n")
    assert sent[1].startswith(b"event: error\r\n")
    assert b'"EventsDropped"' in sent[1]
    assert b"no longer kept" in sent[1]
    assert sent[-1] == b""

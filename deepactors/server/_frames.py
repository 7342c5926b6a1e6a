"""Server-sent event frames: how an event, a run's metadata and stream parts go on the wire.

Below both the responses that stream them and the runs relay that keeps them
for other processes, so that neither imports the other.
"""

from __future__ import annotations

import json

from .._core.jsonvalue import JSONObject, JSONValue
from ..langchain.views import StreamPart

__all__ = ["error_event", "metadata_frame", "part_frame", "part_frames", "sse_frame"]


def sse_frame(event: str, data: object) -> bytes:
    """One server-sent event: ``event: <name>`` and its JSON ``data``."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=repr)
    return f"event: {event}\r\ndata: {body}\r\n\r\n".encode()


def metadata_frame(run_id: str) -> bytes:
    """The ``metadata`` event that opens a run's stream: ``sse_frame`` without
    a JSON encoder's trip for an id that needs no escaping (our UUIDs)."""
    if '"' in run_id or "\\" in run_id or not run_id.isprintable():
        return sse_frame("metadata", {"run_id": run_id, "attempt": 1})
    return f'event: metadata\r\ndata: {{"run_id":"{run_id}","attempt":1}}\r\n\r\n'.encode()


def part_frame(part: StreamPart) -> bytes:
    """One stream part as the SSE frame sent for it."""
    name = part.mode if not part.namespace else "|".join((part.mode, *part.namespace))
    data = list(part.data) if part.mode == "messages" else part.data
    return sse_frame(name, data)


def part_frames(parts: list[StreamPart]) -> bytes:
    """Stream parts as the SSE frames sent for them (empty: nothing to send)."""
    return b"".join(part_frame(p) for p in parts)


def error_event(result: JSONObject | None, status: str) -> JSONValue:
    """The data of the ``error`` event that ends the stream of a run that ended
    with ``result`` and ``status`` (None: it ended without an error)."""
    if result is not None and "__error__" in result:
        return result["__error__"]
    if status == "timeout":
        return {"error": "TimeoutError", "message": "the run passed its deadline"}
    return None

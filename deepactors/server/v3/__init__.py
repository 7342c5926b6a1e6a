"""LangGraph's v3 thread session (``client.threads.stream``) over HTTP and SSE.

``POST /threads/{thread_id}/commands`` answers the session's commands
(:mod:`._commands`); ``POST /threads/{thread_id}/stream/events`` streams the
thread's events, filtered (:mod:`._events`); a thread's session follows its
runs and keeps their events for replay (:mod:`._session`), rendered from the
runs' events (:mod:`._render`). The WebSocket transport is not served.
"""

from __future__ import annotations

from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from ._commands import run_command
from ._events import stream_events

__all__ = ["WEBSOCKET_REFUSAL", "refuse_websocket", "thread_session_routes"]

WEBSOCKET_REFUSAL = (
    "the v3 session's WebSocket transport is not served here: use "
    "client.threads.stream(..., transport='sse')"
)


async def refuse_websocket(websocket: WebSocket) -> None:
    """``transport="websocket"``: accepted only to be closed with why (1008)."""
    await websocket.accept()
    await websocket.close(code=1008, reason=WEBSOCKET_REFUSAL)


thread_session_routes = [
    Route("/threads/{thread_id}/commands", run_command, methods=["POST"]),
    Route("/threads/{thread_id}/stream/events", stream_events, methods=["POST"]),
    WebSocketRoute("/threads/{thread_id}/stream/events", refuse_websocket),
]

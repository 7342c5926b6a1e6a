"""A small Anthropic Messages API server on 127.0.0.1, for tests of the real SDK.

It speaks ``POST /v1/messages`` over real HTTP from a background thread
(``http.server.ThreadingHTTPServer``): plain JSON, and server-sent events with the
API's event sequence when the request asks for ``"stream": true``. Tests script
the answers and read back what the SDK sent::

    with FakeAnthropicAPI() as api:
        api.reply(message(text("Hi"), tool_use("search", {"q": "x"})))
        api.reply(error(429, "rate_limit_error", "slow down", retry_after=0.01))
        ... AnthropicModel(base_url=api.base_url, api_key="test") ...
        api.requests[0].body["messages"]

A scripted :class:`Reply` describes one answer; whether it is sent as JSON or as
a stream depends on the request, so one script serves both ``generate`` and
``stream``. When the script is empty, ``default`` (a function of the request
body) answers.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

JSON = dict[str, Any]

__all__ = [
    "FakeAnthropicAPI",
    "RecordedRequest",
    "Reply",
    "error",
    "message",
    "redacted_thinking",
    "text",
    "thinking",
    "tool_use",
]


# -- building answers ------------------------------------------------------------


def text(value: str) -> JSON:
    """A text content block."""
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = "sig-1") -> JSON:
    """A thinking content block with its signature."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def redacted_thinking(data: str) -> JSON:
    """A redacted thinking block."""
    return {"type": "redacted_thinking", "data": data}


_tool_ids = iter(range(1, 1_000_000))


def tool_use(name: str, input: Any, id: str | None = None) -> JSON:
    """A tool_use block; ``input`` may be anything, to test malformed input."""
    return {
        "type": "tool_use",
        "id": id or f"toolu_{next(_tool_ids):04d}",
        "name": name,
        "input": input,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer.

    Attributes:
        content: Content blocks of a successful message.
        stop_reason: ``end_turn``, ``tool_use``, ...; default: ``tool_use`` if
            there is a tool_use block, else ``end_turn``.
        usage: The usage record (``input_tokens``, ``output_tokens``,
            ``cache_read_input_tokens``, ``cache_creation_input_tokens``).
        status: HTTP status; not 200 means an error answer.
        error_type: The API's error type (``rate_limit_error``, ...).
        error_message: The API's error message.
        headers: Extra response headers (``retry-after``).
        delay: Seconds the server waits before answering (blocking its thread).
        stream_error: For a streamed answer: send an ``error`` event after the
            first content block instead of finishing.
        raw_tool_json: For a streamed answer: the exact ``partial_json`` text of
            each tool_use block by index (to send malformed JSON).
        chunk: Size of the text/JSON pieces of a streamed answer.
        event_delay: Seconds between two events of a streamed answer.
    """

    content: tuple[JSON, ...] = ()
    stop_reason: str | None = None
    usage: Mapping[str, int] = field(
        default_factory=lambda: {"input_tokens": 10, "output_tokens": 5}
    )
    status: int = 200
    error_type: str = ""
    error_message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    stream_error: JSON | None = None
    raw_tool_json: Mapping[int, str] = field(default_factory=dict)
    chunk: int = 4
    event_delay: float = 0.0


def message(*content: JSON, **kwargs: Any) -> Reply:
    """A successful answer with these content blocks."""
    return Reply(content=content, **kwargs)


def error(
    status: int, error_type: str, msg: str, *, retry_after: float | None = None, **kwargs: Any
) -> Reply:
    """An error answer, optionally with a ``retry-after`` header (seconds)."""
    headers = dict(kwargs.pop("headers", {}))
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    return Reply(status=status, error_type=error_type, error_message=msg, headers=headers, **kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """What the server received."""

    path: str
    headers: Mapping[str, str]
    body: JSON
    at: float


# -- the server ------------------------------------------------------------------


class FakeAnthropicAPI:
    """The server. Start it with ``with`` (or :meth:`start`/:meth:`close`).

    Attributes:
        requests: Every request received, in arrival order.
        in_flight: Requests being answered right now.
        max_in_flight: The most requests ever answered at the same time.
        open_connections: Client connections not closed yet (keep-alive ones
            included): what a client that is never closed leaves behind.
        default: Answers a request when the script is empty.
    """

    def __init__(self, default: Callable[[JSON], Reply] | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.open_connections = 0
        self.default = default
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting

    def reply(self, *replies: Reply) -> None:
        """Queue answers, used in order, one per request."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted answers not used yet."""
        with self._lock:
            return len(self._script)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- lifetime

    def start(self) -> None:
        """Listen on a free port and serve from a daemon thread."""
        api = self

        class Handler(_Handler):
            owner = api

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # Keep-alive connections the client never closed must not block shutdown.
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and close the listening socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropicAPI:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- called from handler threads

    def _next_reply(self, body: JSON) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.default is not None:
            return self.default(body)
        return error(500, "api_error", "the fake API's script is empty")

    def _enter(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connections when many clients connect at once,
    # and a dropped SYN costs the client a 1 s retransmit.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (a cancelled stream) is expected here;
        # anything else is printed as usual.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropicAPI
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    timeout = 10  # a handler thread never waits forever for a client that left
    # Headers and body go out in separate writes; with Nagle's algorithm the body
    # would wait for the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner.open_connections += 1

    def finish(self) -> None:
        # Reached when the client closes the connection (or after `timeout`).
        with self.owner._lock:
            self.owner.open_connections -= 1
        super().finish()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        if self.path.split("?")[0] != "/v1/messages":
            self._send_json(404, _error_body("not_found_error", f"no route {self.path}"))
            return
        body = json.loads(raw)
        recorded = RecordedRequest(
            path=self.path, headers=dict(self.headers.items()), body=body, at=time.monotonic()
        )
        self.owner._enter(recorded)
        left = False
        problem = _invalid(body)
        if problem is not None:
            # Rejected like the real API would, without using up a scripted answer.
            try:
                self._send_json(400, _error_body("invalid_request_error", problem))
            finally:
                self.owner._leave()
            return

        def leave() -> None:
            # Called just before the write that lets the client finish: once it has
            # the answer it may send its next request, which must not be counted
            # while this one still is.
            nonlocal left
            if not left:
                left = True
                self.owner._leave()

        try:
            reply = self.owner._next_reply(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                self._send_json(
                    reply.status,
                    _error_body(reply.error_type, reply.error_message),
                    reply.headers,
                    leave,
                )
            elif body.get("stream"):
                self._send_stream(reply, body, leave)
            else:
                self._send_json(200, _message_json(reply, body), reply.headers, leave)
        finally:
            leave()

    def _send_json(
        self,
        status: int,
        data: JSON,
        headers: Mapping[str, str] = {},
        before_last_write: Callable[[], None] = lambda: None,
    ) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", "req_fake")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        before_last_write()
        self.wfile.write(payload)

    def _send_stream(self, reply: Reply, body: JSON, before_last_write: Callable[[], None]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", "req_fake")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        events = list(_stream_events(reply, body))
        for i, (name, data) in enumerate(events):
            if reply.event_delay:
                time.sleep(reply.event_delay)
            if i == len(events) - 1:
                before_last_write()
            chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _invalid(body: JSON) -> str | None:
    """Why the real API would answer 400 to ``body``, for the rules it enforces that
    an adapter can get wrong; ``None`` when the body is acceptable."""
    messages = body.get("messages")
    if not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        return "system: Input should be a valid list"
    for i, turn in enumerate(messages):
        content = turn.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not content:
            return f"messages.{i}: all messages must have non-empty content"
        for block in content:
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for b in [block, *(inner if isinstance(inner, list) else [])]:
                if b.get("type") == "text" and not b.get("text", "").strip():
                    return f"messages.{i}: text content blocks must contain non-whitespace text"
    for block in system if isinstance(system, list) else []:
        if block.get("type") == "text" and not block.get("text", "").strip():
            return "system: text content blocks must contain non-whitespace text"
    if "output_format" in body:
        return "output_format: Extra inputs are not permitted (use output_config.format)"
    fmt = (body.get("output_config") or {}).get("format")
    if fmt is not None:
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            return "output_config.format: expected {'type': 'json_schema', 'schema': {...}}"
        problem = _strict_schema_problem(fmt["schema"], "output_config.format.schema")
        if problem is not None:
            return problem
    return None


def _strict_schema_problem(schema: Any, where: str) -> str | None:
    """What structured outputs refuse in a schema: an object not closed to extra keys."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        return f"{where}: For 'object' type, 'additionalProperties' must be explicitly set to false"
    children = [*schema.get("properties", {}).values(), *schema.get("$defs", {}).values()]
    for key in ("items", "anyOf", "allOf"):
        value = schema.get(key)
        children += value if isinstance(value, list) else [value] if value else []
    for child in children:
        problem = _strict_schema_problem(child, where)
        if problem is not None:
            return problem
    return None


def _error_body(error_type: str, msg: str) -> JSON:
    return {"type": "error", "error": {"type": error_type, "message": msg}}


def _stop_reason(reply: Reply) -> str:
    if reply.stop_reason is not None:
        return reply.stop_reason
    has_tool = any(block["type"] == "tool_use" for block in reply.content)
    return "tool_use" if has_tool else "end_turn"


def _message_json(reply: Reply, body: JSON) -> JSON:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": list(reply.content),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": dict(reply.usage),
    }


def _pieces(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def _stream_events(reply: Reply, body: JSON) -> Iterator[tuple[str, JSON]]:
    """The real API's event sequence for one message."""
    usage = dict(reply.usage)
    start = _message_json(reply, body) | {
        "content": [],
        "stop_reason": None,
        # message_start reports input and cache counts; output grows in message_delta.
        "usage": usage | {"output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(reply.content):
        kind = block["type"]
        if kind == "text":
            opening: JSON = {"type": "text", "text": ""}
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "tool_use":
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        else:
            opening = block
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        if kind == "text":
            for piece in _pieces(block["text"], reply.chunk):
                yield _delta(index, {"type": "text_delta", "text": piece})
        elif kind == "thinking":
            for piece in _pieces(block["thinking"], reply.chunk):
                yield _delta(index, {"type": "thinking_delta", "thinking": piece})
            yield _delta(index, {"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            raw = reply.raw_tool_json.get(index, json.dumps(block["input"]))
            # The API sends an empty first piece, then the JSON in small pieces.
            yield _delta(index, {"type": "input_json_delta", "partial_json": ""})
            for piece in _pieces(raw, reply.chunk):
                yield _delta(index, {"type": "input_json_delta", "partial_json": piece})
        if reply.stream_error is not None:
            yield "error", {"type": "error", "error": reply.stream_error}
            return
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _delta(index: int, delta: JSON) -> tuple[str, JSON]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}

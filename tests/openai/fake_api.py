"""A small OpenAI API server on 127.0.0.1 (Chat Completions and Responses) for the real SDK.

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` over real
HTTP from a background thread, as JSON or as server-sent events when the request
asks for ``"stream": true``. Every request body is validated against the SDK's
own request param types (``CompletionCreateParams*``, ``ResponseCreateParams*``)
with pydantic, keys the types do not know included: a malformed body is answered
with a 400 and recorded in ``invalid``, so a test that checks ``api.invalid == []``
fails on it. Tests script the answers::

    with FakeOpenAI() as api:
        api.reply(answer("Hi", calls=[call("search", {"q": "x"})]))
        api.reply(error(429, "rate_limit_exceeded", "slow down", retry_after=0.01))
        ... OpenAIModel(base_url=api.base_url, api_key="test") ...

One :class:`Answer` serves both APIs and both modes. ``compat=True`` on an
answer plays a sloppy OpenAI-compatible server: no usage, no ids, tool-call
arguments one character per chunk without an index after the first, no
``finish_reason``.
"""

from __future__ import annotations

import itertools
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

from pydantic import TypeAdapter, ValidationError

JSON = dict[str, Any]

__all__ = ["Answer", "FakeOpenAI", "Recorded", "answer", "call", "error"]

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of an answer; ``raw`` overrides the arguments' JSON text."""

    name: str
    args: Any
    raw: str | None = None
    id: str = field(default_factory=lambda: f"call_{next(_ids):05d}")


def call(name: str, args: Any, raw: str | None = None) -> Call:
    """A tool call."""
    return Call(name, args, raw)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """One scripted answer (see the module docstring)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    reasoning: str | None = None
    refusal: str | None = None
    usage: Mapping[str, int] = field(
        default_factory=lambda: {"input": 100, "output": 20, "cached": 0}
    )
    status: int = 200
    code: str = ""
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk: int = 3
    compat: bool = False
    finish_reason: str | None = None


def answer(text: str = "", *, calls: list[Call] | tuple[Call, ...] = (), **kw: Any) -> Answer:
    """A successful answer."""
    return Answer(text=text, calls=tuple(calls), **kw)


def error(
    status: int, code: str, message: str, *, retry_after: float | None = None, **kw: Any
) -> Answer:
    """An error answer, optionally with ``retry-after`` (seconds)."""
    headers = dict(kw.pop("headers", {}))
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    return Answer(status=status, code=code, message=message, headers=headers, **kw)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """A request the server received."""

    path: str
    body: JSON
    headers: Mapping[str, str]


# -- validation against the SDK's own request types ----------------------------------

_ADAPTERS: dict[tuple[str, bool], TypeAdapter[Any]] = {}
_ADAPTERS_LOCK = threading.Lock()


def _adapter(path: str, stream: bool) -> TypeAdapter[Any]:
    with _ADAPTERS_LOCK:
        found = _ADAPTERS.get((path, stream))
        if found is None:
            if path == "/v1/chat/completions":
                from openai.types.chat import completion_create_params as c

                kind: Any = (
                    c.CompletionCreateParamsStreaming
                    if stream
                    else c.CompletionCreateParamsNonStreaming
                )
            else:
                from openai.types.responses import response_create_params as r

                kind = (
                    r.ResponseCreateParamsStreaming
                    if stream
                    else r.ResponseCreateParamsNonStreaming
                )
            found = _ADAPTERS[(path, stream)] = TypeAdapter(kind)
        return found


def _materialize(value: Any) -> Any:
    # pydantic validates Iterable[...] fields lazily: walking them runs the validation.
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    try:
        return [_materialize(v) for v in value]
    except TypeError:
        return value


def _dropped(sent: Any, kept: Any, where: str = "") -> str | None:
    """The first key the types did not know (pydantic drops unknown TypedDict keys)."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key, value in sent.items():
            if key not in kept:
                return f"{where}{key}: not a field of the SDK's request type"
            found = _dropped(value, kept[key], f"{where}{key}.")
            if found:
                return found
    elif isinstance(sent, list) and isinstance(kept, list):
        for i, (a, b) in enumerate(zip(sent, kept, strict=False)):
            found = _dropped(a, b, f"{where}{i}.")
            if found:
                return found
    return None


def validate(path: str, body: JSON) -> str | None:
    """Why ``body`` is not a valid request for ``path`` by the SDK's types, or None."""
    try:
        kept = _materialize(_adapter(path, bool(body.get("stream"))).validate_python(body))
    except ValidationError as exc:
        return (
            str(exc).splitlines()[0]
            + ": "
            + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        )
    return _dropped(body, kept)


# -- the server -------------------------------------------------------------------------


class FakeOpenAI:
    """The server; start it with ``with``.

    Attributes:
        requests: Every request received, in order.
        invalid: ``(path, why)`` of every request the SDK's types refused.
        max_in_flight: The most requests answered at the same time.
        default: Answers a request (a function of its body) when the script is empty.
    """

    def __init__(self, default: Callable[[JSON], Answer] | None = None) -> None:
        self.requests: list[Recorded] = []
        self.invalid: list[tuple[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.default = default
        self._script: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def reply(self, *answers: Answer) -> None:
        """Queue answers, used one per request in order."""
        with self._lock:
            self._script.extend(answers)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        """Listen on a free port, serving from a daemon thread."""
        api = self

        class Handler(_Handler):
            owner = api

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _next(self, body: JSON) -> Answer:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.default is not None:
            return self.default(body)
        return error(500, "server_error", "the fake API's script is empty")


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAI
    protocol_version = "HTTP/1.1"
    timeout = 10
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        path = self.path.split("?")[0]
        if path not in ("/v1/chat/completions", "/v1/responses"):
            self._json(
                404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}
            )
            return
        body = json.loads(raw)
        owner = self.owner
        problem = validate(path, body)
        with owner._lock:
            owner.requests.append(
                Recorded(path=path, body=body, headers=dict(self.headers.items()))
            )
            if problem is not None:
                owner.invalid.append((path, problem))
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            if problem is not None:
                self._json(400, {"error": {"message": problem, "type": "invalid_request_error"}})
                return
            reply = owner._next(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                self._json(
                    reply.status,
                    {
                        "error": {
                            "message": reply.message,
                            "type": "invalid_request_error"
                            if reply.status < 500
                            else "server_error",
                            "code": reply.code or None,
                            "param": None,
                        }
                    },
                    reply.headers,
                )
                return
            chat = path == "/v1/chat/completions"
            if body.get("stream"):
                events = _chat_chunks(reply, body) if chat else _response_events(reply, body)
                self._sse(events, named=not chat)
            else:
                self._json(200, _chat_json(reply, body) if chat else _response_json(reply, body))
        finally:
            with owner._lock:
                owner.in_flight -= 1

    def _json(self, status: int, data: JSON, headers: Mapping[str, str] = {}) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("x-request-id", "req_fake")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _sse(self, events: Iterator[JSON | str], *, named: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:
            if isinstance(event, str):
                text = f"data: {event}\n\n"
            elif named:
                text = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            else:
                text = f"data: {json.dumps(event)}\n\n"
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# -- Chat Completions ---------------------------------------------------------------


def _finish(reply: Answer) -> str | None:
    if reply.compat:
        return None
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.calls else "stop"


def _args(c: Call) -> str:
    return c.raw if c.raw is not None else json.dumps(c.args)


def _chat_usage(reply: Answer) -> JSON:
    u = reply.usage
    prompt = u.get("input", 0) + u.get("cached", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.get("output", 0),
        "total_tokens": prompt + u.get("output", 0),
        "prompt_tokens_details": {"cached_tokens": u.get("cached", 0)},
    }


def _chat_json(reply: Answer, body: JSON) -> JSON:
    message: JSON = {"role": "assistant", "content": reply.text or None, "refusal": reply.refusal}
    if reply.calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": c.name, "arguments": _args(c)}}
            | ({} if reply.compat else {"id": c.id})
            for c in reply.calls
        ]
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    data: JSON = {
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
    }
    if not reply.compat:
        data["id"] = f"chatcmpl-{next(_ids)}"
        data["usage"] = _chat_usage(reply)
    return data


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chat_chunks(reply: Answer, body: JSON) -> Iterator[JSON | str]:
    base: JSON = {"object": "chat.completion.chunk", "created": 0, "model": body["model"]}
    if not reply.compat:
        base["id"] = f"chatcmpl-{next(_ids)}"

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.reasoning or "", reply.chunk):
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(reply.text, reply.chunk):
        yield chunk({"content": piece})
    for i, c in enumerate(reply.calls):
        first: JSON = {
            "index": i,
            "type": "function",
            "function": {"name": c.name, "arguments": ""},
        }
        if not reply.compat:
            first["id"] = c.id
        yield chunk({"tool_calls": [first]})
        size = 1 if reply.compat else reply.chunk
        for piece in _pieces(_args(c), size):
            part: JSON = {"function": {"arguments": piece}}
            if not reply.compat:
                part["index"] = i
            yield chunk({"tool_calls": [part]})
    yield chunk({}, _finish(reply))
    if not reply.compat and (body.get("stream_options") or {}).get("include_usage"):
        yield base | {"choices": [], "usage": _chat_usage(reply)}
    yield "[DONE]"


# -- Responses ------------------------------------------------------------------------


def _items(reply: Answer) -> list[JSON]:
    items: list[JSON] = []
    if reply.reasoning is not None:
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{next(_ids)}",
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
                "encrypted_content": f"enc:{reply.reasoning}",
            }
        )
    if reply.text or reply.refusal:
        part = (
            {"type": "refusal", "refusal": reply.refusal}
            if reply.refusal
            else {"type": "output_text", "text": reply.text, "annotations": []}
        )
        items.append(
            {
                "type": "message",
                "id": f"msg_{next(_ids)}",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    for c in reply.calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{next(_ids)}",
                "call_id": c.id,
                "name": c.name,
                "arguments": _args(c),
                "status": "completed",
            }
        )
    return items


def _response_json(reply: Answer, body: JSON, items: list[JSON] | None = None) -> JSON:
    u = reply.usage
    data: JSON = {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": 0,
        "model": body["model"],
        "status": "completed",
        "output": _items(reply) if items is None else items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if reply.finish_reason == "length":
        data["status"] = "incomplete"
        data["incomplete_details"] = {"reason": "max_output_tokens"}
    if not reply.compat:
        data["usage"] = {
            "input_tokens": u.get("input", 0) + u.get("cached", 0),
            "input_tokens_details": {"cached_tokens": u.get("cached", 0)},
            "output_tokens": u.get("output", 0),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.get("input", 0) + u.get("cached", 0) + u.get("output", 0),
        }
    return data


def _response_events(reply: Answer, body: JSON) -> Iterator[JSON]:
    seq = itertools.count()
    items = _items(reply)
    created = _response_json(reply, body, []) | {"status": "in_progress"}
    yield {"type": "response.created", "sequence_number": next(seq), "response": created}
    for index, item in enumerate(items):
        opening = dict(item)
        if item["type"] == "message":
            opening["content"] = []
        elif item["type"] == "function_call":
            opening["arguments"] = ""
        yield {
            "type": "response.output_item.added",
            "sequence_number": next(seq),
            "output_index": index,
            "item": opening,
        }
        common = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message" and reply.text:
            for piece in _pieces(reply.text, reply.chunk):
                yield common | {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
        elif item["type"] == "function_call":
            for piece in _pieces(item["arguments"], reply.chunk):
                yield common | {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": next(seq),
                    "delta": piece,
                }
        elif item["type"] == "reasoning":
            for piece in _pieces(reply.reasoning or "", reply.chunk):
                yield common | {
                    "type": "response.reasoning_summary_text.delta",
                    "sequence_number": next(seq),
                    "summary_index": 0,
                    "delta": piece,
                }
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": index,
            "item": item,
        }
    final = _response_json(reply, body, items)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield {"type": kind, "sequence_number": next(seq), "response": final}

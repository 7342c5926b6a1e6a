"""W7's request in process: the server's work from its ASGI entry to a stream's first byte.

    python bench/w7_request.py [--requests 200] [--auth] [--top 30]

Sends W7's request (``POST /runs/stream``, stateless, ``updates``, the W2 tree of
``bench/w7_serve.py``; ``--auth``: with an API key, as ``W7_AUTH=1``) to
``create_app``'s ASGI app in this process, with a fake ``receive`` and ``send``,
one request at a time (each run to its end, with no model latency, before the
next), and counts the Python bytecodes run from the app's entry to the
response's first body byte (``sys.settrace`` opcode events), in all and per
function. In a burst of streams, that work is what each request's first event
waits for, once per request ahead of it.

Bytecodes do not depend on the machine's load, so two trees can be compared at
any time: run the script with ``PYTHONPATH`` set to each tree's root (it imports
the ``deepactors`` found there), e.g. a worktree of the base commit and this one.
They leave out what C code does (``dict()``, pydantic-core's parsing, a digest):
``bench/instructions.py``-style callgrind counts, or W7 itself, weigh that.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _w7_clients import BENCH_KEY
from w2_fanout import child_turn, lookup

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest

BODY = json.dumps(
    {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": "go"}]},
        "stream_mode": ["updates"],
    }
).encode()


def build_agent(fanout: int = 3) -> Any:
    """W7's tree (``bench/w7_serve.py``), with no model latency."""

    def main_answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": f"topic {i}", "subagent_type": "r"})
                for i in range(fanout)
            ]
            return AssistantMessage(tool_calls=calls)
        return AssistantMessage(content=f"report from {len(request.messages) - 2} findings")

    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
        "model": FunctionModel(lambda r: child_turn(r.messages)),
    }
    return create_deep_agent(FunctionModel(main_answer), tools=[lookup], subagents=[child])


def request_scope(auth: bool) -> dict[str, Any]:
    """The ASGI scope of W7's request as uvicorn hands it over."""
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"accept", b"text/event-stream"),
        *([(b"authorization", f"Bearer {BENCH_KEY}".encode())] if auth else []),
        (b"connection", b"close"),
        (b"content-length", str(len(BODY)).encode()),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": "/runs/stream",
        "raw_path": b"/runs/stream",
        "query_string": b"",
        "headers": headers,
        "state": {},
    }


class Counter:
    """Bytecodes per function while on (``sys.settrace`` opcode events)."""

    def __init__(self, root: str) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._root = root

    def _trace(self, frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            where = code.co_filename
            if where == "<string>":  # a dataclass's generated __init__: name its class
                where = type(frame.f_locals.get("self")).__name__
            else:
                where = where.split("site-packages/")[-1].removeprefix(self._root)
            self.counts[f"{where}:{code.co_name}"] += 1
        return self._trace

    def on(self) -> None:
        sys.settrace(self._trace)

    def off(self) -> None:
        sys.settrace(None)


async def serve(app: Any, counter: Counter | None, auth: bool) -> None:
    """One request through ``app``, counted (if ``counter``) up to its first body byte."""
    ended = anyio.Event()
    unread = True
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal unread
        if unread:
            unread = False
            return {"type": "http.request", "body": BODY, "more_body": False}
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal counter
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
        elif counter is not None:
            counter.off()
            counter = None
        if message["type"] == "http.response.body" and not message.get("more_body"):
            ended.set()

    scope = request_scope(auth)
    if counter is not None:
        counter.on()
    await app(scope, receive, send)
    ended.set()
    if statuses != [200]:
        raise RuntimeError(f"the request was answered {statuses}")


async def measure(requests: int, auth: bool) -> Counter:
    from deepactors.server import create_app

    extra: dict[str, Any] = {}
    if auth:
        from deepactors.server.auth import api_keys

        extra["auth"] = api_keys({BENCH_KEY: "bench"})
    # No caps per client, as bench/w7_serve.py serves (an older tree has none).
    for cap in ("max_streams_per_client", "max_runs_per_client"):
        if cap in inspect.signature(create_app).parameters:
            extra[cap] = None
    app = create_app({"agent": build_agent()}, defer_gc=True, **extra)
    import deepactors

    counter = Counter(str(Path(deepactors.__file__).parent.parent) + "/")
    to_app, app_in = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_out, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)
    async with anyio.create_task_group() as tg, to_app, from_app:
        lifespan = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        tg.start_soon(app, lifespan, app_in.receive, app_out.send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        for _ in range(20):  # warm: first-time paths (imports, caches) left out
            await serve(app, None, auth)
        for _ in range(requests):
            await serve(app, counter, auth)
        await to_app.send({"type": "lifespan.shutdown"})
        await from_app.receive()
    return counter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--auth", action="store_true", help="with an API key (W7_AUTH=1)")
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    args = parser.parse_args()
    counts = anyio.run(measure, args.requests, args.auth).counts
    n = args.requests
    import deepactors

    print(
        f"W7's request to its first byte ({'API key' if args.auth else 'no auth'}), "
        f"deepactors at {Path(deepactors.__file__).parent}: "
        f"{sum(counts.values()) / n:.0f} bytecodes per request"
    )
    for where, count in counts.most_common(args.top):
        print(f"{count / n:8.1f}  {where}")


if __name__ == "__main__":
    main()

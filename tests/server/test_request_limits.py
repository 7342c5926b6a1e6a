"""Request limits of ``create_app``: body size and time, streams per client.

A body past ``max_body`` is refused with 413, from its declared length before
a byte of it is read, or as it streams in (chunked); one trickled past
``body_timeout`` gets 408; past ``max_streams_per_client`` open streams a
client gets 429. On the stream endpoints' direct path and routed ones alike,
on uvicorn (asyncio) and hypercorn (trio), in a thread.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from deepactors.server import create_app
from tests.waiting import wait_until_sync

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]
LIMIT = 1024


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _chunks(total: int, size: int = 256) -> Iterator[bytes]:
    """A body of ``total`` bytes, streamed (chunked: no length is declared)."""
    for start in range(0, total, size):
        yield b" " * min(size, total - start)


def test_a_body_past_the_limit_is_refused(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}, max_body=LIMIT))
    json_type = {"Content-Type": "application/json"}
    with httpx.Client(base_url=served.url) as http:
        for method, path in [
            ("POST", "/runs/stream"),
            ("POST", "/runs/wait"),
            ("POST", "/threads"),
            ("PUT", "/store/items"),
        ]:
            declared = http.request(method, path, content=b" " * (LIMIT + 1), headers=json_type)
            assert declared.status_code == 413, (path, declared.text)
            assert f"limit is {LIMIT}" in declared.json()["detail"]
            streamed = http.request(method, path, content=_chunks(64 * LIMIT), headers=json_type)
            assert streamed.status_code == 413, (path, streamed.text)
            assert f"limit of {LIMIT}" in streamed.json()["detail"]
        assert probe.calls == 0
        assert list(served.runs.runs) == []
        # At the limit exactly, declared or streamed, the body is read.
        body = json.dumps({"assistant_id": "echo", "input": say("hi")}).encode()
        exact = body + b" " * (LIMIT - len(body))
        for content in (exact, iter([exact[:100], exact[100:]])):
            answer = http.post("/runs/wait", content=content, headers=json_type)
            assert answer.status_code == 200, answer.text
            assert answer.json()["messages"][-1]["content"] == "echo: hi"


def _send_head(url: str, path: str, length: int, first: bytes) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()
    try:
        sock.sendall(head + first)
    except BaseException:
        sock.close()
        raise
    return sock


def _response(sock: socket.socket, timeout: float) -> tuple[int, bytes]:
    """The status and all the server sent until it closed the connection."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_a_trickled_body_is_cut_off(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}, body_timeout=0.5))
    # The servers' own loggers, as they configured them (uvicorn's do not propagate).
    for name in ("uvicorn.error", "hypercorn.error"):
        logging.getLogger(name).addHandler(caplog.handler)
    for path in ("/runs/stream", "/runs/wait"):
        started = time.monotonic()
        sock = _send_head(served.url, path, 100, b'{"assistant_id"')
        with sock:
            sock.sendall(b":")  # and nothing more
            status, data = _response(sock, timeout=5)
        waited = time.monotonic() - started
        assert status == 408, data
        assert b"did not arrive in time" in data
        assert 0.4 < waited < 3, waited  # cut off, and the connection closed
    assert probe.calls == 0
    assert list(served.runs.runs) == []
    served.stop()  # whatever the app did after the answers is done now
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []  # a clean end


async def _reads_late(request: Request) -> Response:
    await anyio.sleep(0.6)  # past the deadline before reading the body at all
    return JSONResponse({"read": len(await request.body())})


def test_a_body_read_after_its_deadline_is_refused(serve: Serve) -> None:
    """An endpoint that reads the body only after its deadline gets the 408 itself
    (nothing waited in ``receive`` for the guard to answer)."""
    app = create_app({"echo": blocking_agent(Probe())}, body_timeout=0.3)
    app.add_route("/late", _reads_late, methods=["POST"])
    served = serve(app)
    answer = httpx.post(f"{served.url}/late", json={"a": 1})
    assert answer.status_code == 408, answer.text
    assert "did not arrive in time" in answer.json()["detail"]
    assert answer.headers["connection"] == "close"


def test_streams_per_client_are_capped(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}, max_streams_per_client=2))
    body = {"assistant_id": "echo", "input": say("wait"), "stream_mode": "custom"}
    with ExitStack() as held, httpx.Client(base_url=served.url, timeout=10) as http:
        for _ in range(2):
            stream = held.enter_context(http.stream("POST", "/runs/stream", json=body))
            assert stream.status_code == 200
        wait_until_sync(lambda: probe.active == 2)  # both runs wait in their tool
        for path in ("/runs/stream", "/runs/wait"):
            refused = http.post(path, json={"assistant_id": "echo", "input": say("hi")})
            assert refused.status_code == 429, refused.text
            assert "2 streams open" in refused.json()["detail"]
        assert http.get("/ok").status_code == 200  # the rest is served
        assert len(served.runs.runs) == 2
        probe.release.set()
    # Once they end, the client may open streams again.
    wait_until_sync(lambda: served.app.guard.open_streams("127.0.0.1") == 0)
    answer = httpx.post(f"{served.url}/runs/wait", json={"assistant_id": "echo", "input": say("a")})
    assert answer.status_code == 200


def _user(scope: Scope) -> bytes | None:
    return dict(scope["headers"]).get(b"x-user")


def test_the_stream_cap_is_keyed_by_the_hook(serve: Serve) -> None:
    probe = Probe()
    app = create_app({"echo": blocking_agent(probe)}, max_streams_per_client=1, stream_key=_user)
    served = serve(app)
    body = {"assistant_id": "echo", "input": say("wait"), "stream_mode": "custom"}
    with (
        httpx.Client(base_url=served.url, timeout=10) as http,
        http.stream("POST", "/runs/stream", json=body, headers={"X-User": "ann"}) as held,
    ):
        assert held.status_code == 200
        wait_until_sync(lambda: probe.active == 1)
        quick = {"assistant_id": "echo", "input": say("hi")}
        assert http.post("/runs/wait", json=quick, headers={"X-User": "ann"}).status_code == 429
        assert http.post("/runs/wait", json=quick, headers={"X-User": "bob"}).status_code == 200
        # No key: not counted.
        assert http.post("/runs/wait", json=quick).status_code == 200
        probe.release.set()

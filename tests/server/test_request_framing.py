"""Requests RFC 9112 and 9110 tell a server to refuse, refused alike on both servers.

Two ``Host`` headers (or none in HTTP/1.1), a target that is not a path
(``GET http://evil.example/info``) and a credential given twice are answered
400 before anything runs: uvicorn served the first three (the last ``Host``
won, and the name in an absolute target went unchecked), and both servers
took the last of two ``X-Api-Key`` headers. On uvicorn (asyncio) and hypercorn
(trio), through the test servers and through ``deepactors serve``.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from deepactors.server import create_app
from deepactors.server.auth import api_keys

from .agents import Probe, blocking_agent
from .conftest import Served
from .serve_process import serve_process

Serve = Callable[..., Served]
ALICE = "alice-key-0123456789"
BOB = "bob-key-012345678901"


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def exchange(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send a raw request; its status and body (the connection is then closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        answer = b""
        with contextlib.suppress(OSError):
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
                head_end = answer.find(b"\r\n\r\n")
                if head_end >= 0:
                    length = _length(answer[:head_end])
                    if length is not None and len(answer) - head_end - 4 >= length:
                        break
    assert answer.startswith(b"HTTP/1.1 "), answer
    return int(answer.split(b" ", 2)[1]), answer.partition(b"\r\n\r\n")[2]


def _length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


def test_two_hosts_or_none_are_refused(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    port = _port(served.url)
    mine = f"127.0.0.1:{port}"
    for hosts in (["evil.example", mine], [mine, "evil.example"], [mine, mine]):
        lines = "".join(f"Host: {h}\r\n" for h in hosts)
        status, body = exchange(port, f"GET /info HTTP/1.1\r\n{lines}")
        assert status == 400, (hosts, body)
        if body:  # (hypercorn refuses these itself, with no body)
            assert "more than one Host" in json.loads(body)["detail"]
    status, body = exchange(port, "GET /info HTTP/1.1\r\n")
    assert status == 400, body
    run = json.dumps({"assistant_id": "echo", "input": {"messages": "hi"}})
    status, _ = exchange(
        port,
        f"POST /runs/wait HTTP/1.1\r\nHost: evil.example\r\nHost: {mine}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(run)}\r\n",
        run.encode(),
    )
    assert status == 400
    assert probe.calls == 0
    # One Host, or HTTP/1.0 without one, is served as before.
    assert exchange(port, f"GET /info HTTP/1.1\r\nHost: {mine}\r\n")[0] == 200
    assert exchange(port, "GET /info HTTP/1.0\r\n")[0] == 200


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_a_target_that_is_not_a_path_is_refused(loop: str, tmp_path: Path) -> None:
    with serve_process(["--loop", loop], tmp_path) as (url, _):
        port = _port(url)
        mine = f"127.0.0.1:{port}"
        for target in ("http://evil.example/info", f"http://{mine}/info", "*"):
            status, body = exchange(port, f"GET {target} HTTP/1.1\r\nHost: {mine}\r\n")
            assert status == 400, (target, body)
            assert "origin-form" in json.loads(body)["detail"]
        # With a body: answered, and the connection closed after it.
        status, _ = exchange(
            port,
            f"POST http://evil.example/threads HTTP/1.1\r\nHost: {mine}\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n",
            b"{}",
        )
        assert status == 400
        status, body = exchange(port, f"GET /info HTTP/1.1\r\nHost: {mine}\r\n")
        assert status == 200, body
        status, body = exchange(
            port, f"GET /info HTTP/1.1\r\nHost: evil.example\r\nHost: {mine}\r\n"
        )
        assert status == 400, body


def test_a_credential_given_twice_is_refused(serve: Serve) -> None:
    probe = Probe()
    auth = api_keys({ALICE: "alice", BOB: "bob"})
    served = serve(create_app({"echo": blocking_agent(probe)}, auth=auth))
    port = _port(served.url)
    mine = f"Host: 127.0.0.1:{port}\r\n"
    twice = [
        f"X-Api-Key: {BOB}\r\nX-Api-Key: {ALICE}\r\n",
        f"X-Api-Key: {ALICE}\r\nX-Api-Key: {ALICE}\r\n",
        f"Authorization: Bearer {BOB}\r\nAuthorization: Bearer {ALICE}\r\n",
        f"X-Api-Key: nope\r\nX-Api-Key: {ALICE}\r\n",
    ]
    for headers in twice:
        status, body = exchange(port, f"POST /threads HTTP/1.1\r\n{mine}{headers}")
        assert status == 400, (headers, body)
        assert "more than once" in json.loads(body)["detail"]
    # One of each is one credential: Authorization first, as before.
    both = f"Authorization: Bearer {ALICE}\r\nX-Api-Key: {BOB}\r\n"
    status, body = exchange(port, f"POST /threads HTTP/1.1\r\n{mine}{both}Content-Length: 0\r\n")
    assert status == 200, body
    assert json.loads(body)["metadata"]["owner"] == "alice"
    assert len(served.runs.threads) == 1  # only that one was made

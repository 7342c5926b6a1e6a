"""A remote subagent whose server answers garbage, the wrong thing, or nothing: the
parent's model reads what went wrong, and nothing is merged. The servers are
sockets this test serves itself, on both loops."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import SocketStream

from deepactors import create_deep_agent
from deepactors.middleware import SubAgentSpec
from deepactors.models import FunctionModel
from deepactors.remote import RemoteAgent

from .conftest import answers, parent_model, run_collecting, say

INFO = b'{"version": "deepactors"}'


def _http(status: str, content_type: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
    head += f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode() + body


@asynccontextmanager
async def serving(answer: Callable[[bytes], bytes | None]) -> AsyncIterator[str]:
    """A socket server answering each request with ``answer(request head)``
    (None: say nothing, and hold the connection open)."""

    async def handle(stream: SocketStream) -> None:
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive()
            reply = answer(head)
            if reply is None:
                await anyio.sleep_forever()
            await stream.send(reply)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tg.cancel_scope.cancel()


async def _one_child(url: str, *, listen: bool = False, **options: float) -> tuple[str, str]:
    """One remote child's status and answer; ``listen``: with someone listening to the
    parent (the child streams its run's events), else not (it waits for its end)."""
    remote = RemoteAgent(name="r", graph_id="agent", url=url, **options)
    agent = create_deep_agent(
        FunctionModel(parent_model),
        subagents=[SubAgentSpec(name="r", description="remote", agent=remote)],
    )
    order = say([("r", "echo x")], files={"/a.md": "a"})
    with anyio.fail_after(30):
        if listen:
            result, _ = await run_collecting(agent, order)
        else:
            result = await agent.ainvoke(order)
    assert isinstance(result, dict), result
    assert set(result["files"]) == {"/a.md"}  # nothing merged
    [(status, text)] = answers(result)
    return status, text


async def test_a_server_that_answers_no_http() -> None:
    async with serving(lambda head: b"SSH-2.0-OpenSSH_9.2\r\n") as url:
        status, text = await _one_child(url)
    assert status == "error"
    assert url in text


async def test_a_server_that_answers_html() -> None:
    page = _http("200 OK", "text/html", b"<html><body>It works!</body></html>")
    async with serving(lambda head: page) as url:
        status, text = await _one_child(url)
    assert status == "error"
    assert "not JSON" in text
    assert "It works!" in text


async def test_a_server_that_answers_a_page_instead_of_a_stream() -> None:
    def answer(head: bytes) -> bytes:
        if head.startswith(b"GET /info"):
            return _http("200 OK", "application/json", INFO)
        return _http("200 OK", "text/html", b"<html>maintenance</html>")

    async with serving(answer) as url:
        status, text = await _one_child(url, listen=True)
    assert status == "error"
    assert "not an event stream" in text
    assert "maintenance" in text


async def test_a_stream_whose_events_are_not_json() -> None:
    def answer(head: bytes) -> bytes:
        if head.startswith(b"GET /info"):
            return _http("200 OK", "application/json", INFO)
        meta = json.dumps({"run_id": "r1"})
        body = f"event: metadata\ndata: {meta}\n\nevent: custom\ndata: {{oops\n\n".encode()
        return _http("200 OK", "text/event-stream", body)

    async with serving(answer) as url:
        status, text = await _one_child(url, listen=True)
    assert status == "error"
    assert "is not JSON" in text
    assert "{oops" in text


@pytest.mark.parametrize("listen", [False, True], ids=["waiting", "streaming"])
async def test_a_server_that_hangs_is_given_up_after_the_read_timeout(listen: bool) -> None:
    def answer(head: bytes) -> bytes | None:
        if head.startswith(b"GET /info"):
            return _http("200 OK", "application/json", INFO)
        return None  # the run's request: never answered

    async with serving(answer) as url:
        status, text = await _one_child(url, listen=listen, read_timeout=0.5)
    assert status == "error"
    assert "did not answer" in text
    assert "/runs/" in text
    assert url in text


async def test_a_wait_that_answers_the_runs_error() -> None:
    def answer(head: bytes) -> bytes:
        if head.startswith(b"GET /info"):
            return _http("200 OK", "application/json", INFO)
        error = {"__error__": {"error": "ValueError", "message": "bad input"}}
        return _http("200 OK", "application/json", json.dumps(error).encode())

    async with serving(answer) as url:
        status, text = await _one_child(url)
    assert status == "error"
    assert "ValueError: bad input" in text

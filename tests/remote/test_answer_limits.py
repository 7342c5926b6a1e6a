"""A remote server's answers are bounded while they are read (issue 41, item 9).

A single 100 MB event on a run's stream, or a 100 MB body answering a run's
wait, is refused once past ``max_answer_bytes``: the child fails with an error
naming the setting, and the memory it took stays about the cap (measured with
tracemalloc, beside the cap). A stream that only drips heartbeats gives up
after ``idle_timeout``, not at the run's deadline. The servers are sockets
this test serves itself, on both loops; the 100 MB are sent from one 1 MB
buffer, so that the server side adds nothing to what is measured.
"""

from __future__ import annotations

import contextlib
import json
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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
MB = 1_000_000
CAP = 16 * 1024 * 1024
BUFFERS = 8 * 1024 * 1024

Respond = Callable[[bytes, SocketStream], Awaitable[None]]


@asynccontextmanager
async def serving(respond: Respond) -> AsyncIterator[str]:
    """A socket server handing each request's head and its connection to ``respond``."""

    async def handle(stream: SocketStream) -> None:
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive()
            # The client stops reading: what is being tested.
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await respond(head, stream)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tg.cancel_scope.cancel()


def _head(content_type: str, extra: str = "") -> bytes:
    # No content-length: the body runs until the connection closes.
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n{extra}"
    return f"{head}connection: close\r\n\r\n".encode()


async def _huge(stream: SocketStream, prefix: bytes, megabytes: int, suffix: bytes) -> None:
    chunk = b"x" * MB
    await stream.send(prefix)
    for _ in range(megabytes):
        await stream.send(chunk)
    await stream.send(suffix)


async def _ordinary(head: bytes, stream: SocketStream) -> bool:
    """Answer a request other than a run's (``/info``, cancelling, deleting) at once."""
    if b"/runs/stream " in head or b"/runs/wait " in head:
        return False
    body = INFO if head.startswith(b"GET /info") else b"{}"
    await stream.send(_head("application/json", f"content-length: {len(body)}\r\n") + body)
    return True


async def huge_event(head: bytes, stream: SocketStream) -> None:
    """Every run's stream: its metadata, then one event of 100 MB."""
    if await _ordinary(head, stream):
        return
    meta = json.dumps({"run_id": "r1"})
    start = f'event: metadata\ndata: {meta}\n\nevent: custom\ndata: "'.encode()
    await _huge(stream, _head("text/event-stream") + start, 100, b'"\n\n')


async def huge_body(head: bytes, stream: SocketStream) -> None:
    """Every run's wait: a JSON body of 100 MB."""
    if await _ordinary(head, stream):
        return
    await _huge(stream, _head("application/json") + b'{"messages": "', 100, b'"}')


async def drip(head: bytes, stream: SocketStream) -> None:
    """Every run's stream: its metadata, then heartbeats and nothing else, for ever."""
    if await _ordinary(head, stream):
        return
    meta = json.dumps({"run_id": "r1"})
    await stream.send(_head("text/event-stream") + f"event: metadata\ndata: {meta}\n\n".encode())
    while True:
        await stream.send(b": heartbeat\r\n\r\n")
        await anyio.sleep(0.05)


async def _one_child(url: str, *, listen: bool, **options: object) -> tuple[str, str]:
    remote = RemoteAgent(name="r", graph_id="agent", url=url, **options)  # type: ignore[arg-type]
    agent = create_deep_agent(
        FunctionModel(parent_model),
        subagents=[SubAgentSpec(name="r", description="remote", agent=remote)],
    )
    order = say([("r", "echo x")], files={"/a.md": "a"})
    if listen:
        result, _ = await run_collecting(agent, order)
    else:
        result = await agent.ainvoke(order)
    assert isinstance(result, dict), result
    assert set(result["files"]) == {"/a.md"}  # nothing merged
    [(status, text)] = answers(result)
    return status, text


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize(
    ("respond", "listen"),
    [(huge_event, True), (huge_body, False)],
    ids=["an-event-of-a-stream", "the-body-of-a-wait"],
)
async def test_a_100_mb_answer_is_refused_while_it_is_read(respond: Respond, listen: bool) -> None:
    async with serving(respond) as url:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        with anyio.fail_after(120):
            status, text = await _one_child(url, listen=listen, max_answer_bytes=CAP)
        _, peak = tracemalloc.get_traced_memory()
    assert status == "error"
    assert f"more than max_answer_bytes={CAP} bytes" in text
    assert "the rest was not read" in text
    # What the child held at most: the cap's worth of the answer, plus the
    # socket's, httpx's and this server's buffers (1.6-6.6 MiB measured, the
    # most on asyncio in debug mode). Read whole, it was 100 MB and more.
    grown = peak - before
    assert grown < CAP + BUFFERS, f"{grown / 2**20:.1f} MiB for a cap of {CAP / 2**20:.0f} MiB"


async def test_a_stream_of_heartbeats_alone_is_given_up_after_the_idle_timeout() -> None:
    async with serving(drip) as url:
        with anyio.fail_after(30):  # before: held until the run's deadline (none here)
            status, text = await _one_child(url, listen=True, idle_timeout=1)
    assert status == "error"
    assert "sent no event of run r1 for 1 s (idle_timeout" in text
    assert url in text


# --- the same bounds for an A2A agent as a subagent ------------------------------------


def _card(url: str) -> bytes:
    card = {
        "name": "vendor",
        "capabilities": {"streaming": True},
        "supportedInterfaces": [
            {"url": f"{url}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
    }
    body = json.dumps(card).encode()
    return _head("application/json", f"content-length: {len(body)}\r\n") + body


def a2a(kind: str, url: list[str]) -> Respond:
    """An A2A agent whose card is ordinary and whose task stream is ``kind``;
    ``huge-card`` answers with a 100 MB card instead."""

    async def respond(head: bytes, stream: SocketStream) -> None:
        if head.startswith(b"GET /.well-known/agent-card.json"):
            if kind == "huge-card":
                await _huge(stream, _head("application/json") + b'{"name": "', 100, b'"}')
            else:
                await stream.send(_card(url[0]))
            return
        if b"CancelTask" in head or not head.startswith(b"POST /rpc"):
            body = b'{"jsonrpc": "2.0", "id": "1", "result": {}}'
            await stream.send(_head("application/json", f"content-length: {len(body)}\r\n") + body)
            return
        await stream.send(_head("text/event-stream") + b": hello\n\n")
        if kind == "huge-event":
            await _huge(stream, b'data: {"jsonrpc": "2.0", "id": "1", "result": "', 100, b'"}\n\n')
            return
        while True:  # drip: heartbeats and nothing else
            await stream.send(b": heartbeat\r\n\r\n")
            await anyio.sleep(0.05)

    return respond


async def _a2a_child(url: str, **options: object) -> tuple[str, str]:
    from deepactors.remote.a2a import A2AAgent

    vendor = A2AAgent(name="v", url=url, **options)  # type: ignore[arg-type]
    agent = create_deep_agent(
        FunctionModel(parent_model),
        subagents=[SubAgentSpec(name="v", description="a vendor's agent", agent=vendor)],
    )
    result = await agent.ainvoke(say([("v", "look it up")]))
    [(status, text)] = answers(result)
    return status, text


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("kind", ["huge-event", "huge-card"])
async def test_an_a2a_agent_s_100_mb_answer_is_refused_while_it_is_read(kind: str) -> None:
    url: list[str] = []
    async with serving(a2a(kind, url)) as served:
        url.append(served)
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        with anyio.fail_after(120):
            status, text = await _a2a_child(served, max_answer_bytes=CAP)
        _, peak = tracemalloc.get_traced_memory()
    assert status == "error"
    assert f"more than max_answer_bytes={CAP} bytes" in text
    grown = peak - before
    assert grown < CAP + BUFFERS, f"{grown / 2**20:.1f} MiB for a cap of {CAP / 2**20:.0f} MiB"


async def test_an_a2a_stream_of_heartbeats_alone_is_given_up_after_the_idle_timeout() -> None:
    url: list[str] = []
    async with serving(a2a("drip", url)) as served:
        url.append(served)
        with anyio.fail_after(30):  # before: held until the run's deadline (none here)
            status, text = await _a2a_child(served, idle_timeout=1)
    assert status == "error"
    assert "sent no event for 1 s (idle_timeout" in text

"""A deep agent served over MCP (``deepactors mcp``), driven by the mcp SDK's own client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import sniffio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.servers import ROOT, SDK_HTTP_ON_TRIO
from tests.waiting import port_open, wait_until, wait_until_serving

pytestmark = [pytest.mark.anyio, SDK_HTTP_ON_TRIO]

TARGET = "tests.mcp.served_agent:agent"


def command(*extra: str, loop: str) -> list[str]:
    return ["-m", "deepactors", "mcp", TARGET, "--loop", loop, *extra]


def served(log: Path) -> StdioServerParameters:
    """The served agent over stdio, on the loop the test runs on."""
    return StdioServerParameters(
        command=sys.executable,
        args=command(loop=sniffio.current_async_library()),
        cwd=ROOT,
        env={"SERVED_AGENT_LOG": str(log), "PYTHONPATH": str(ROOT)},
    )


async def test_the_agent_answers_the_sdk_client_with_progress_per_subagent(
    tmp_path: Path,
) -> None:
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with anyio.fail_after(60):
        async with (
            stdio_client(served(tmp_path / "log")) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listing = await session.list_tools()
            (tool,) = listing.tools
            assert tool.name == "run"
            assert tool.input_schema["required"] == ["task"]
            result = await session.call_tool(
                "run", {"task": "fan 3"}, progress_callback=on_progress
            )
    assert not result.is_error
    assert result.content[0].text == "all done: 3 answers"  # type: ignore[union-attr]
    spawned = [m for m in progress if "spawned served/task-" in m]
    finished = [m for m in progress if "finished served/task-" in m]
    assert len(spawned) == len(finished) == 3


async def test_a_cancel_from_the_client_cancels_the_tree(tmp_path: Path) -> None:
    log = tmp_path / "log"
    waiting = anyio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if message and "tool wait_here" in message:
            waiting.set()

    with anyio.fail_after(60):
        async with (
            stdio_client(served(log)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await session.call_tool("run", {"task": "hang"}, progress_callback=on_progress)

                tg.start_soon(call)
                await waiting.wait()
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            # The subagent's tool saw the cancellation, in the server process.
            await wait_until(
                lambda: log.exists() and "cancelled" in log.read_text(),
                what="the tool's cancellation logged",
            )
            again = await session.call_tool("run", {"task": "fan 1"})
            counts = [
                await session.call_tool("run", {"task": "count", "thread_id": "t1"})
                for _ in range(2)
            ]
    assert again.content[0].text == "all done: 1 answers"  # type: ignore[union-attr]
    # A thread_id continues the conversation (the server's runtime keeps the thread).
    assert [c.content[0].text for c in counts] == [  # type: ignore[union-attr]
        "asked 1 times",
        "asked 2 times",
    ]


@pytest.fixture(params=["asyncio", "trio"])
def served_http(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The served agent over streamable HTTP (uvicorn on asyncio, hypercorn on trio)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, *command("--http", "--port", str(port), loop=request.param)],
        cwd=ROOT,
        env={**os.environ, "SERVED_AGENT_LOG": str(tmp_path / "log"), "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(proc, lambda: port_open(port), what="deepactors mcp --http started")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_the_agent_served_over_streamable_http_answers(served_http: str) -> None:
    with anyio.fail_after(60):
        async with (
            streamable_http_client(served_http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("run", {"task": "fan 2"})
    assert result.content[0].text == "all done: 2 answers"  # type: ignore[union-attr]

"""Remote subagents on LangGraph's own server (``langgraph dev``, langgraph-api with its
in-memory runtime), on both loops: answers and file changes merge, failures are
read, custom parts and assistant messages come back as events, the parent's
deadline interrupts the remote run, a message reaches a running child, and a
child's thread is deleted as it ends.

LangGraph's server pins its own versions of LangGraph and LangChain, so it is
installed in a virtual environment of its own: ``.ci/run`` makes it in
``.ci/langgraph`` (or set ``DEEPACTORS_LANGGRAPH`` to a ``langgraph`` executable
with the ``inmem`` extra). Without it these tests skip, saying so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from deepactors.context import Inbox, RunContext
from deepactors.events import CustomEvent, Event, ModelCallFinished
from deepactors.remote import REMOTE_RUN, RemoteAgent
from tests.waiting import http_ok, wait_until, wait_until_serving

from .conftest import (
    answers,
    existing,
    parent,
    remote,
    remote_runs_in,
    run_collecting,
    say,
    settled,
)

ROOT = Path(__file__).parents[2]
APP = Path(__file__).with_name("langgraph_app.py")

pytestmark = pytest.mark.slow

JOBS = ("--n-jobs-per-worker", "20")  # runs at once (langgraph dev's default: 1)


def _langgraph() -> str | None:
    given = os.environ.get("DEEPACTORS_LANGGRAPH")
    if given:
        return given
    local = ROOT / ".ci" / "langgraph" / "bin" / "langgraph"
    return str(local) if local.exists() else None


@pytest.fixture(scope="module")
def langgraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` serving langgraph_app.py as ``agent``, on a free port."""
    cli = _langgraph()
    if cli is None:
        pytest.skip(
            "LangGraph's server is not installed: .ci/run puts langgraph-cli[inmem] in "
            ".ci/langgraph (or set DEEPACTORS_LANGGRAPH to its langgraph executable)"
        )
    folder = tmp_path_factory.mktemp("langgraph")
    shutil.copy(APP, folder / "langgraph_app.py")
    (folder / "langgraph.json").write_text(
        '{"dependencies": ["."], "graphs": {"agent": "./langgraph_app.py:graph"}}'
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = folder / "langgraph.log"
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [cli, "dev", "--no-browser", "--no-reload", "--port", str(port), *JOBS],
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(
            process,
            lambda: http_ok(f"{url}/ok"),
            what="LangGraph's server started",
            timeout=90,
            log=log,
        )
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_answers_files_failures_and_events_from_langgraphs_server(
    langgraph_server: str,
) -> None:
    agent = parent([remote("lg", langgraph_server)])
    orders = [("lg", "echo hi"), ("lg", "write /new.md hello"), ("lg", "upper /a.md")]
    result, events = await run_collecting(
        agent, say([*orders, ("lg", "fail")], files={"/a.md": "abc"}), timeout=60
    )
    assert isinstance(result, dict), result
    (s1, echo), (s2, wrote), (s3, upper), (s4, failed) = answers(result)
    assert (s1, echo) == ("success", "echo: echo hi")
    assert (s2, s3, s4) == ("success", "success", "error")
    assert wrote.startswith("wrote /new.md")
    assert upper.startswith("uppercased /a.md")
    assert "RuntimeError: the graph broke" in failed
    assert {p: r.content for p, r in result["files"].items()} == {
        "/a.md": "ABC",
        "/new.md": "hello",
    }
    assert result["files"]["/a.md"].version == 2  # the next version of the one sent
    seen = [
        e.data["seen"]
        for e in events
        if isinstance(e, CustomEvent) and isinstance(e.data, dict) and "seen" in e.data
    ]
    assert sorted(seen) == sorted(text for _, text in [*orders, ("lg", "fail")])
    answered = {e.path for e in events if isinstance(e, ModelCallFinished) and e.path != "main"}
    assert answered == {"main/task-1:lg", "main/task-2:lg", "main/task-3:lg"}
    # Each child's thread was deleted as it ended.
    threads = [r["thread_id"] for r in remote_runs_in(events)]
    assert len(threads) == 4
    assert await existing(langgraph_server, threads) == []


async def test_the_parents_deadline_interrupts_the_run_on_langgraphs_server(
    langgraph_server: str,
) -> None:
    agent = parent([remote("lg", langgraph_server, keep_threads=True)])
    result, events = await run_collecting(agent, say([("lg", "sleep 60")] * 3), timeout=5)
    assert isinstance(result, TimeoutError), result
    runs = remote_runs_in(events)
    assert len(runs) == 3
    assert set(await settled(runs)) == {"interrupted"}


async def test_a_message_reaches_a_running_child_on_langgraphs_server(
    langgraph_server: str,
) -> None:
    agent = RemoteAgent(name="lg", graph_id="agent", url=langgraph_server, keep_threads=True)
    events: list[Event] = []
    inbox = Inbox()
    outcome = None

    async def child() -> None:
        nonlocal outcome
        outcome = await agent.run_child(
            description="sleep 60",
            path="main/task-1:lg",
            label="task-1",
            parent=RunContext(path="main", run_id="parent-run", emit=events.append),
            files={},
            timeout=60,
            inbox=inbox,
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(child)
        await wait_until(
            lambda: any(isinstance(e, CustomEvent) and REMOTE_RUN in e.data for e in events),
            what="the remote run made",
            timeout=30,
        )
        inbox.put("update: hello")
    assert outcome is not None
    assert (outcome.status, outcome.answer) == ("completed", "got hello")
    runs = remote_runs_in(events)
    assert len(runs) == 2
    assert await settled(runs) == ["interrupted", "success"]

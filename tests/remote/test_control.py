"""What reaches a remote child while it runs, and what it is held to, on both loops:
a message in its inbox, a server process killed under it, its parent's budget and
deadline carried with its run and enforced by the deepactors server."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from langgraph_sdk import get_sync_client

from deepactors import Budget, ToolMessage
from deepactors.context import Inbox, RunContext
from deepactors.events import Event
from deepactors.remote import LIMITS_KEY, RemoteAgent
from tests.server.serve_process import serve_process
from tests.waiting import wait_until

from .conftest import (
    answers,
    parent,
    remote,
    remote_runs_in,
    run_collecting,
    running,
    say,
    served_folder,
    settled,
)


async def test_a_message_in_the_inbox_reaches_the_running_remote_child(server: str) -> None:
    agent = RemoteAgent(name="r", graph_id="agent", url=server, keep_threads=True)
    events: list[Event] = []
    run = RunContext(path="main", run_id="parent-run", emit=events.append)
    inbox = Inbox()
    wheres: list[dict[str, str]] = []
    outcome = None

    async def child() -> None:
        nonlocal outcome
        outcome = await agent.run_child(
            description="block",
            path="main/task-1:r",
            label="task-1",
            parent=run,
            files={},
            timeout=60,
            inbox=inbox,
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(child)
        wheres[:] = await running(events)
        inbox.put("update: hello")
    assert outcome is not None
    assert (outcome.status, outcome.answer) == ("completed", "got hello")
    # The message was a second run on the same thread, which interrupted the first.
    runs = remote_runs_in(events)
    assert len(runs) == 2
    assert runs[0]["thread_id"] == runs[1]["thread_id"]
    assert await settled(runs) == ["interrupted", "success"]


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[list[tuple[str, Any]]]:
    """Two in-memory servers; a test may kill one (SIGKILL)."""
    folder = served_folder(tmp_path)
    args = ["remote_app:agents", "--loop", "asyncio"]
    with serve_process(args, folder) as a, serve_process(args, folder) as b:
        yield [a, b]


@pytest.mark.slow
async def test_children_of_a_killed_server_fail_and_the_others_finish(
    two_servers: list[tuple[str, Any]],
) -> None:
    (a, process_a), (b, _) = two_servers
    agent = parent([remote("a", a), remote("b", b)])
    count = 10  # per server
    orders = [("ab"[i % 2], "slow 8") for i in range(2 * count)]
    result: Any = None

    async def run_parent() -> None:
        nonlocal result
        result, _ = await run_collecting(agent, say(orders), timeout=120)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_parent)
        # (run_collecting gives its events when it returns: ask the servers.)

        async def all_running() -> bool:
            return len(await _all_running([a, b])) == 2 * count

        await wait_until(all_running, what="every remote run running", timeout=30, interval=0.05)
        process_a.send_signal(signal.SIGKILL)
    assert isinstance(result, dict), result
    results = answers(result)
    failed = [text for status, text in results[0::2]]
    finished = results[1::2]
    assert finished == [("success", "slept 8")] * count
    for text in failed:
        assert "main/task-" in text
        assert a in text
    assert all(status == "error" for status, _ in results[0::2])


async def _all_running(urls: list[str]) -> list[str]:
    def running() -> list[str]:
        ids = []
        for url in urls:
            with get_sync_client(url=url, api_key=None) as client:
                for thread in client.threads.search(limit=1000):
                    for run in client.runs.list(thread["thread_id"]):
                        if run["status"] == "running":
                            ids.append(run["run_id"])
        return ids

    return await anyio.to_thread.run_sync(running)


async def test_a_remote_child_gets_only_the_budget_its_parent_has_left(server: str) -> None:
    # The parent's first call leaves 2 of 3 model calls; the child spends
    # them on the server, which refuses its third: the child failed, saying
    # so, and its calls are charged to the parent, whose own next call is refused.
    agent = parent([remote("r", server, keep_threads=True)])
    result, events = await run_collecting(
        agent, say([("r", "spend")]), budget=Budget(model_calls=3)
    )
    assert isinstance(result, dict), result
    [tool] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool.status == "error"
    assert "BudgetExceeded" in tool.text
    assert "model calls" in tool.text
    assert result["budget"].model_calls == 3
    assert result["messages"][-1].stop_reason == "budget_exhausted"
    [where] = remote_runs_in(events)
    with get_sync_client(url=server, api_key=None) as client:
        run = client.runs.get(where["thread_id"], where["run_id"])
    assert run["metadata"]["budget"]["model_calls"] == 2
    assert run["metadata"]["budget"]["exhausted"] == ["model_calls"]


def test_the_server_ends_a_run_at_the_timeout_its_parent_sent(server: str) -> None:
    with get_sync_client(url=server, api_key=None) as client:
        thread = client.threads.create()["thread_id"]
        run = client.runs.create(
            thread,
            "agent",
            input={"messages": [{"role": "user", "content": "block"}]},
            config={"configurable": {LIMITS_KEY: {"timeout": 0.5}}},
        )
        client.runs.join(thread, run["run_id"])
        assert client.runs.get(thread, run["run_id"])["status"] == "timeout"


@pytest.mark.parametrize(
    "limits",
    [
        {"timeout": -1},
        {"timeout": "soon"},
        {"budget": {"model_calls": -2}},
        {"budget": {"dollars": 1}},
        {"deadline": 3},
        "ten seconds",
    ],
)
def test_limits_that_are_not_limits_are_refused_before_anything_runs(
    server: str, limits: object
) -> None:
    from langgraph_sdk.errors import UnprocessableEntityError

    with get_sync_client(url=server, api_key=None) as client:
        thread = client.threads.create()["thread_id"]
        with pytest.raises(UnprocessableEntityError, match=LIMITS_KEY):
            client.runs.create(
                thread,
                "agent",
                input={"messages": [{"role": "user", "content": "echo x"}]},
                config={"configurable": {LIMITS_KEY: limits}},
            )
        assert client.runs.list(thread) == []


async def test_a_remote_subagents_own_timeout_cancels_its_run(server: str) -> None:
    agent = parent([remote("r", server, timeout=2, keep_threads=True)])
    result, events = await run_collecting(agent, say([("r", "block")]), timeout=60)
    assert isinstance(result, dict), result
    [(status, text)] = answers(result)
    assert status == "error"
    assert "did not finish within its 2 s timeout" in text
    # Cancelled from here: the server's timeout (what was left, and a grace)
    # is for a parent that is gone.
    assert await settled(remote_runs_in(events)) == ["interrupted"]

"""A remote child's thread is deleted on its server once the child ends (its answer and
file changes are here by then), unless the subagent keeps threads or the thread
waits for a human decision; a background child's thread lives while it works. On
a real ``deepactors serve``, both loops, read with langgraph-sdk's client."""

from __future__ import annotations

import re

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.events import Event
from deepactors.models import FunctionModel, ModelRequest

from .conftest import (
    answers,
    existing,
    parent,
    remote,
    remote_runs_in,
    run_collecting,
    running,
    say,
    statuses,
)


async def test_a_task_leaves_no_thread_on_the_server(server: str) -> None:
    # Whichever way the child ended: it answered, its run failed, it timed out.
    agent = parent([remote("r", server), remote("slow", server, timeout=1)])
    result, events = await run_collecting(
        agent,
        say([("r", "write /a.md x"), ("r", "fail"), ("slow", "block")]),
        timeout=60,
    )
    assert isinstance(result, dict), result
    assert [s for s, _ in answers(result)] == ["success", "error", "error"]
    assert result["files"]["/a.md"].content == "x"  # (merged before its thread went)
    threads = [r["thread_id"] for r in remote_runs_in(events)]
    assert len(set(threads)) == 3
    assert await existing(server, threads) == []


async def test_with_keep_threads_the_thread_stays_with_its_run(server: str) -> None:
    agent = parent([remote("r", server, keep_threads=True)])
    result, events = await run_collecting(agent, say([("r", "echo kept")]), timeout=60)
    assert isinstance(result, dict), result
    assert answers(result) == [("success", "echo: kept")]
    [where] = remote_runs_in(events)
    assert await existing(server, [where["thread_id"]]) == [where["thread_id"]]
    assert await statuses([where]) == ["success"]


async def test_a_thread_waiting_for_a_human_decision_stays(server: str) -> None:
    agent = parent([remote("asker", server, graph_id="asker")])
    result, events = await run_collecting(agent, say([("asker", "ask")]), timeout=60)
    assert isinstance(result, dict), result
    [(status, text)] = answers(result)
    assert status == "error"
    [where] = remote_runs_in(events)
    assert where["thread_id"] in text  # where it waits, which is still there
    assert await existing(server, [where["thread_id"]]) == [where["thread_id"]]


async def test_a_background_childs_thread_lives_while_it_works(server: str) -> None:
    # The parent starts a background child that blocks, looks for its thread
    # while it runs, then sends it a message that makes it finish.
    events: list[Event] = []
    seen_running: list[list[str]] = []

    async def model(request: ModelRequest) -> AssistantMessage:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            start = {"description": "block", "subagent_type": "r"}
            return AssistantMessage(tool_calls=[ToolCall(name="start_async_task", args=start)])
        if len(results) == 1:
            runs = await running(events)
            assert len(runs) == 1, runs
            seen_running.append(await existing(server, [runs[0]["thread_id"]]))
            [task_id] = re.findall(r"task_id: (\S+)", results[0].text)
            args = {"task_id": task_id, "message": "update: done"}
            return AssistantMessage(tool_calls=[ToolCall(name="update_async_task", args=args)])
        return AssistantMessage(content="steered")

    agent = create_deep_agent(
        FunctionModel(model), subagents=[remote("r", server, background=True)]
    )
    result, _ = await run_collecting(agent, {"messages": "go"}, timeout=60, events=events)
    assert isinstance(result, dict), result
    [task] = result["async_tasks"].values()
    assert (task["status"], task["result"]) == ("success", "got done")
    thread_id = remote_runs_in(events)[0]["thread_id"]
    assert seen_running == [[thread_id]]
    assert await existing(server, [thread_id]) == []

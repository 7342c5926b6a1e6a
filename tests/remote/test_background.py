"""Remote subagents as background tasks (the lead's ``start_async_task`` & co. running a
:class:`~deepactors.remote.RemoteAgent`), on a real ``deepactors serve``, both loops:
a message sent with ``update_async_task`` reaches the running remote child, and
``cancel_async_task`` cancels its run on the server."""

from __future__ import annotations

import re
from typing import Any

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.events import Event
from deepactors.models import FunctionModel, ModelRequest

from .conftest import remote, remote_runs_in, run_collecting, running, settled


def steering(then: str, events: list[Event], **args: str) -> FunctionModel:
    """A parent that starts one background task ("block"), then, once the task's run
    is running on the server, calls ``then`` on it (with ``args``), then answers."""

    async def model(request: ModelRequest) -> AssistantMessage:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            start = {"description": "block", "subagent_type": "r"}
            return AssistantMessage(tool_calls=[ToolCall(name="start_async_task", args=start)])
        if len(results) == 1:
            runs = await running(events)
            assert len(runs) == 1, runs
            [task_id] = re.findall(r"task_id: (\S+)", results[0].text)
            call = ToolCall(name=then, args={"task_id": task_id, **args})
            return AssistantMessage(tool_calls=[call])
        return AssistantMessage(content="steered")

    return FunctionModel(model)


async def _steer(server: str, then: str, **args: str) -> tuple[dict[str, Any], list[Event]]:
    events: list[Event] = []
    agent = create_deep_agent(
        steering(then, events, **args),
        subagents=[remote("r", server, background=True, keep_threads=True)],
    )
    result, _ = await run_collecting(agent, {"messages": "go"}, timeout=60, events=events)
    assert isinstance(result, dict), result
    return result, events


async def test_update_async_task_reaches_the_remote_child(server: str) -> None:
    result, events = await _steer(server, "update_async_task", message="update: hello")
    [task] = result["async_tasks"].values()
    assert (task["status"], task["result"]) == ("success", "got hello")
    runs = remote_runs_in(events)
    assert len(runs) == 2  # the message was a second run on the child's thread
    assert await settled(runs) == ["interrupted", "success"]


async def test_cancel_async_task_cancels_the_remote_run(server: str) -> None:
    result, events = await _steer(server, "cancel_async_task")
    [task] = result["async_tasks"].values()
    assert task["status"] == "cancelled"
    [run] = remote_runs_in(events)
    assert await settled([run]) == ["interrupted"]

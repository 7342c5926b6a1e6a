"""A background subagent placed on Ray: started, told more while it works (the
message reaches it on its worker), and collected."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.actors import open_runtime
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.placement import RayPlacement
from tests.placement.agents import worker_subagent
from tests.waiting import wait_until

LAUNCHED = re.compile(r"task_id: (\S+)")


def script(gate: Path) -> FunctionModel:
    """The parent: what it does depends on the user's latest message."""

    def answer(request: ModelRequest) -> AssistantMessage:
        messages = list(request.messages)
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        user, turn = messages[last_user].text, messages[last_user + 1 :]
        results = [m.text for m in turn if isinstance(m, ToolMessage)]
        if results:
            return AssistantMessage(content=" | ".join(results))
        ids = [x for m in messages if isinstance(m, ToolMessage) for x in LAUNCHED.findall(m.text)]
        match user:
            case "start":
                args: dict[str, Any] = {"description": f"heed {gate}", "subagent_type": "w"}
                return AssistantMessage(tool_calls=[ToolCall(name="start_async_task", args=args)])
            case "steer":
                args = {"task_id": ids[0], "message": "mind the cost"}
                return AssistantMessage(tool_calls=[ToolCall(name="update_async_task", args=args)])
            case _:
                args = {"task_id": ids[0]}
                return AssistantMessage(tool_calls=[ToolCall(name="check_async_task", args=args)])

    return FunctionModel(answer)


async def test_a_background_task_on_ray_is_told_more_and_collected(
    placement: RayPlacement, tmp_path: Path
) -> None:
    gate = tmp_path / "open"
    agent = create_deep_agent(
        script(gate),
        subagents=[worker_subagent(background=True)],
        checkpointer=MemoryCheckpointer(),
        placement=placement,
    )
    with anyio.fail_after(60):
        async with open_runtime() as rt:
            started = await agent.ainvoke("start", thread_id="t", runtime=rt)
            assert "task_id" in started["messages"][-1].text
            steered = await agent.ainvoke("steer", thread_id="t", runtime=rt)
            assert "error" not in steered["messages"][-1].text.lower()
            gate.touch()

            async def heeded() -> Any:
                # Until the task is done (it heeds the message first).
                collected = await agent.ainvoke("collect", thread_id="t", runtime=rt)
                return "heeded" in collected["messages"][-1].text and collected

            collected = await wait_until(heeded, what="the task done", timeout=60, interval=0.1)
    assert "heeded mind the cost" in collected["messages"][-1].text

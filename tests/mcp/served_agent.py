"""The agent ``deepactors mcp`` serves in the tests: a deterministic model, subagents.

Its task decides what it does: ``count`` says how many user messages its
thread holds; ``fan N`` delegates N briefs to the ``helper`` subagent; ``hang``
delegates one that waits in a tool until cancelled, writing ``cancelled`` to
the file ``SERVED_AGENT_LOG`` names when it is.
"""

from __future__ import annotations

import os

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest


async def wait_here() -> str:
    """Wait until cancelled."""
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        with open(os.environ["SERVED_AGENT_LOG"], "a") as f:  # noqa: ASYNC230 - a test marker
            f.write("cancelled\n")
        raise
    return "never"


def _main(request: ModelRequest) -> AssistantMessage:
    task = request.messages[-1].text
    if task == "count":
        asked = sum(isinstance(m, UserMessage) for m in request.messages)
        return AssistantMessage(content=f"asked {asked} times")
    task = request.messages[0].text
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if results:
        return AssistantMessage(content=f"all done: {len(results)} answers")
    if task.startswith("fan"):
        n = int(task.split()[1])
        briefs = [f"brief {i}" for i in range(n)]
    else:
        briefs = ["hang"]
    return AssistantMessage(
        tool_calls=[
            ToolCall(name="task", args={"description": b, "subagent_type": "helper"})
            for b in briefs
        ]
    )


def _helper(request: ModelRequest) -> AssistantMessage:
    brief = request.messages[0].text
    if brief == "hang" and not any(isinstance(m, ToolMessage) for m in request.messages):
        return AssistantMessage(tool_calls=[ToolCall(name="wait_here", args={})])
    return AssistantMessage(content=f"helped with {brief}")


agent = create_deep_agent(
    FunctionModel(_main),
    subagents=[
        {
            "name": "helper",
            "description": "helps",
            "system_prompt": "help",
            "model": FunctionModel(_helper),
            "tools": [wait_here],
        }
    ],
    name="served",
)

"""An agent with background researchers, for ``deepactors serve`` in the served test.

A researcher's final answer waits until a file ``open-<topic>`` appears in the
working folder: the test, in another process, opens the gates.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest

TOPICS = ["alpha", "beta", "gamma"]


async def researcher(request: ModelRequest) -> AssistantMessage:
    brief = request.messages[0].text
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="write_file",
                    args={"file_path": f"/notes/{brief}.md", "content": f"on {brief}\n"},
                )
            ]
        )
    gate = anyio.Path(Path.cwd() / f"open-{brief}")
    while True:  # the gate is a file the test (another process) makes
        if await gate.exists():
            break
        await anyio.sleep(0.02)
    return AssistantMessage(content=f"report on {brief}")


def lead(request: ModelRequest) -> AssistantMessage | str:
    messages = list(request.messages)
    start = max(
        i
        for i, m in enumerate(messages)
        if isinstance(m, UserMessage) and not m.text.startswith("[")
    )
    turn = messages[start:]
    if any(isinstance(m, ToolMessage) for m in turn):
        return "ok: " + " | ".join(m.text for m in turn if isinstance(m, ToolMessage))
    user = turn[0].text
    if user == "research":
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="start_async_task", args={"description": t, "subagent_type": "r"})
                for t in TOPICS
            ]
        )
    if user == "status?":
        return AssistantMessage(tool_calls=[ToolCall(name="list_async_tasks", args={})])
    return "noted"


agent = create_deep_agent(
    FunctionModel(lead),
    subagents=[
        {
            "name": "r",
            "description": "researches a topic",
            "system_prompt": "r",
            "model": FunctionModel(researcher),
            "background": True,
        }
    ],
)

"""A fan-out run for the crash test, run as its own process.

    python crash_agent.py MODE DB LOG LOOP

DB is a SQLite file or a ``postgresql://`` URL.
MODE ``first`` starts a fan-out of 20 subagents; the 10 "slow" ones hang in their
first model call, so the test can SIGKILL the process once the 10 fast ones have
finished. MODE ``resume`` continues the thread (nothing hangs any more); MODE
``clean`` runs the same fan-out uninterrupted. Every model call is appended to LOG,
and the final messages and files are printed as JSON.
"""

from __future__ import annotations

import json
import sys

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import open_checkpointer

MODE, DB, LOG, LOOP = sys.argv[1:5]
BRIEFS = [f"fast{i}" for i in range(10)] + [f"slow{i}" for i in range(10)]


def log(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(f"{MODE} {line}\n")


async def child(request: ModelRequest) -> AssistantMessage:
    brief = request.messages[0].text
    await anyio.to_thread.run_sync(log, f"call {brief}")
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        if brief.startswith("slow") and MODE == "first":
            await anyio.sleep_forever()  # until the test kills the process
        await anyio.sleep(0.01)
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="write_file",
                    args={"file_path": f"/notes/{brief}.md", "content": f"notes on {brief}\n"},
                )
            ]
        )
    return AssistantMessage(content=f"finished {brief}")


def parent(request: ModelRequest) -> AssistantMessage:
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="task", args={"description": b, "subagent_type": "w"}) for b in BRIEFS
            ]
        )
    return AssistantMessage(content="report: " + ", ".join(sorted(BRIEFS)))


agent = create_deep_agent(
    FunctionModel(parent),
    subagents=[
        {"name": "w", "description": "w", "system_prompt": "w", "model": FunctionModel(child)}
    ],
    checkpointer=open_checkpointer(DB),
)
result = agent.invoke(None if MODE == "resume" else "go", thread_id="t", backend=LOOP)
print(
    json.dumps(
        {
            "messages": [[m.role, m.text] for m in result["messages"]],
            "files": {p: r.content for p, r in sorted(result["files"].items())},
        }
    )
)

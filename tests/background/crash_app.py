"""A thread with five background tasks, run as its own process for the crash test.

    python crash_app.py PHASE DB LOG LOOP

PHASE ``first`` starts five tasks on thread ``t``: alpha and beta finish at
once, gamma, delta and epsilon hang; once the idle thread has folded alpha and
beta in, the process prints ``READY`` and waits to be killed. PHASE ``resume``
sends the thread a message (its tasks that were running are started again,
nothing hangs any more), waits for every task to end, asks the model to check
each, and prints the thread's tasks and check results as JSON. Every child
model call is appended to LOG as ``PHASE TOPIC``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.actors import open_runtime
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer

PHASE, DB, LOG, LOOP = sys.argv[1:5]
TOPICS = ["alpha", "beta", "gamma", "delta", "epsilon"]
FAST = {"alpha", "beta"}


def log(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(f"{PHASE} {line}\n")


async def child(request: ModelRequest) -> AssistantMessage:
    brief = request.messages[0].text
    await anyio.to_thread.run_sync(log, brief)
    if PHASE == "first" and brief not in FAST:
        await anyio.sleep_forever()  # until the test kills the process
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="write_file",
                    args={"file_path": f"/notes/{brief}.md", "content": f"on {brief}\n"},
                )
            ]
        )
    return AssistantMessage(content=f"report on {brief} ({PHASE})")


def parent(request: ModelRequest) -> AssistantMessage | str:
    messages = list(request.messages)
    start = max(
        i
        for i, m in enumerate(messages)
        if isinstance(m, UserMessage) and not m.text.startswith("[")
    )
    turn = messages[start:]
    user = turn[0].text
    if any(isinstance(m, ToolMessage) for m in turn):
        return "ok: " + " | ".join(m.text for m in turn if isinstance(m, ToolMessage))
    if user == "research":
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="start_async_task", args={"description": t, "subagent_type": "r"})
                for t in TOPICS
            ]
        )
    if user == "collect":
        ids = [
            m.text.split("task_id: ")[1]
            for m in messages
            if isinstance(m, ToolMessage) and m.text.startswith("Launched")
        ]
        return AssistantMessage(
            tool_calls=[ToolCall(name="check_async_task", args={"task_id": i}) for i in ids]
        )
    return "noted"


agent = create_deep_agent(
    FunctionModel(parent),
    subagents=[
        {
            "name": "r",
            "description": "researches a topic",
            "system_prompt": "r",
            "model": FunctionModel(child),
            "background": True,
        }
    ],
    checkpointer=SqliteCheckpointer(DB),
)


async def statuses(thread: object) -> dict[str, str]:
    values = (await thread.state()).values  # type: ignore[attr-defined]
    return {e["description"]: e["status"] for e in values["async_tasks"].values()}


async def until(ok: Callable[[dict[str, str]], bool], thread: object) -> None:
    # Polled through the thread's saved state, as another process would see it.
    while True:
        if ok(await statuses(thread)):
            return
        await anyio.sleep(0.02)


async def main() -> None:
    async with open_runtime() as rt:
        thread = rt.thread(agent, "t")
        if PHASE == "first":
            await (await thread.start({"messages": "research"})).result()
            await until(lambda s: all(s.get(t) == "success" for t in FAST), thread)
            print("READY", flush=True)
            await anyio.sleep_forever()
        await (await thread.start({"messages": "how are they doing?"})).result()
        with anyio.fail_after(60):
            await until(lambda s: "running" not in s.values(), thread)
        result = await (await thread.start({"messages": "collect"})).result()
        checks = [
            json.loads(m.text)
            for m in result["messages"]
            if isinstance(m, ToolMessage) and m.name == "check_async_task"
        ]
        values = (await thread.state()).values
        print(
            json.dumps(
                {
                    "statuses": await statuses(thread),
                    "checks": checks,
                    "files": sorted(values["files"]),
                    "notices": [
                        m.text for m in values["messages"] if m.text.startswith("[Background")
                    ],
                }
            )
        )


anyio.run(main, backend=LOOP)

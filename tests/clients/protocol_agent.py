"""The agent the other protocols' client tests serve (AG-UI, the AI SDK's stream).

Written into the test's folder and served by a real ``deepactors serve``. Its
model is a deterministic function of the conversation (the last user message):

- ``fan N``: N ``task`` calls, ``worker`` subagents (``fan N mixed``: every
  other one a ``reader``), each answering ``done: job i`` (``read: job i``),
  streamed; then ``all N subagents done`` (``fan N slow``: the workers wait a
  minute, to be cancelled);
- ``delegate email``: a ``mailer`` subagent calls ``send_email``, which stops
  for a human inside it;
- ``plan``: writes the todos, then ``/notes.md``, then ``planned``;
- ``think``: an answer with reasoning (``let me think``) and text;
- ``email``: a ``send_email`` call, which stops for a human; then ``sent: ...``
  or ``not sent: ...``;
- ``slow``: waits a minute (a run to cancel);
- ``fail``: the model raises;
- anything else: ``echo #<n>: <text>``, ``n`` the user messages the model sees.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["AGENT_MODULE", "write_agent"]

AGENT_MODULE = '''
import re

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.messages import TextBlock, ThinkingBlock, Usage
from deepactors.models import FunctionModel
from deepactors.persistence import MemoryCheckpointer


def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient.
        body: What it says.
    """
    return f"sent to {to}: {body}"


async def worker(request):
    if "slow" in request.messages[0].text:
        await anyio.sleep_forever()  # until the client cancels the run
    return AssistantMessage(
        content="done: " + request.messages[0].text,
        usage=Usage(input_tokens=10, output_tokens=5),
    )


async def reader(request):
    return AssistantMessage(content="read: " + request.messages[0].text)


async def mailer(request):
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return AssistantMessage(content=f"mailer: {last.text}")
    return AssistantMessage(
        tool_calls=[ToolCall(name="send_email", args={"to": "dan", "body": last.text})]
    )


async def main(request):
    last = request.messages[-1]
    users = [m for m in request.messages if m.role == "user"]
    said = users[-1].text if users else ""
    if isinstance(last, ToolMessage):
        if last.name == "send_email":
            verdict = "not sent" if last.status == "error" else "sent"
            return AssistantMessage(content=f"{verdict}: {last.text}")
        if last.name == "write_todos":
            note = {"file_path": "/notes.md", "content": "# notes\\n"}
            return AssistantMessage(tool_calls=[ToolCall(name="write_file", args=note)])
        if last.name == "write_file":
            return AssistantMessage(content="planned")
        since = request.messages[request.messages.index(users[-1]) :]
        results = [m for m in since if isinstance(m, ToolMessage)]
        return AssistantMessage(content=f"all {len(results)} subagents done")
    fan = re.search(r"fan (\\d+)( mixed)?( slow)?", said)
    if fan:
        kinds = ["worker", "reader"] if fan.group(2) else ["worker"]
        slow = fan.group(3) or ""
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="task",
                    args={"description": f"job {i}{slow}", "subagent_type": kinds[i % len(kinds)]},
                )
                for i in range(int(fan.group(1)))
            ]
        )
    if said == "delegate email":
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="task", args={"description": "mail dan", "subagent_type": "mailer"})
            ]
        )
    if said == "plan":
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="write_todos",
                    args={"todos": [{"content": "write notes", "status": "in_progress"}]},
                )
            ]
        )
    if said == "think":
        return AssistantMessage(
            content=[ThinkingBlock(thinking="let me think"), TextBlock(text="thought it through")],
            usage=Usage(input_tokens=7, output_tokens=3),
        )
    if "email" in said:
        return AssistantMessage(
            tool_calls=[ToolCall(name="send_email", args={"to": "bob", "body": said})]
        )
    if said == "slow":
        await anyio.sleep_forever()  # until the client cancels the run
    if said == "fail":
        raise RuntimeError("the model broke")
    return AssistantMessage(content=f"echo #{len(users)}: {said}")


agent = create_deep_agent(
    FunctionModel(main, stream_chunk=4),
    tools=[send_email],
    subagents=[
        {
            "name": "worker",
            "description": "does one job",
            "system_prompt": "work",
            "model": FunctionModel(worker, stream_chunk=4),
        },
        {
            "name": "mailer",
            "description": "sends mail",
            "system_prompt": "mail",
            "model": FunctionModel(mailer),
            "tools": [send_email],
            "interrupt_on": {"send_email": True},
        },
        {
            "name": "reader",
            "description": "reads one thing",
            "system_prompt": "read",
            "model": FunctionModel(reader, stream_chunk=4),
        },
    ],
    interrupt_on={"send_email": {"allowed_decisions": ["approve", "edit", "reject"]}},
    checkpointer=MemoryCheckpointer(),
    max_concurrent_subagents=100,
)
'''


def write_agent(folder: Path) -> str:
    """Write the agent module into ``folder``; its ``module:attribute`` to serve."""
    (folder / "protocol_app.py").write_text(AGENT_MODULE)
    return "protocol_app:agent"

"""One of two processes running the same thread, for the thread-lease test.

    python turns_agent.py WHO DB LOOP RUNS

DB is a SQLite file or a ``postgresql://`` URL.
Prints ``ready``, waits for a line on stdin (so both processes start together),
then runs thread ``t`` RUNS times with the sync ``invoke`` on LOOP. Each run is
the user message "WHO i", one ``note`` tool call and an answer that says how
many messages the model was shown: with the lease, every run sees the whole
history before it, whichever process wrote it.
"""

from __future__ import annotations

import sys

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent, tool
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import open_checkpointer

WHO, DB, LOOP, RUNS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


@tool
def note(text: str) -> str:
    """Take a note."""
    return f"noted {text}"


async def answer(request: ModelRequest) -> AssistantMessage:
    label = next(m.text for m in reversed(request.messages) if m.role == "user")
    if isinstance(request.messages[-1], ToolMessage):
        return AssistantMessage(content=f"{label} done after {len(request.messages)}")
    return AssistantMessage(tool_calls=[ToolCall(name="note", args={"text": label})])


# A model takes a moment (latency=): the other process gets to ask meanwhile.
model = FunctionModel(answer, latency=0.002)
agent = create_deep_agent(model, tools=[note], checkpointer=open_checkpointer(DB))
print("ready", flush=True)
sys.stdin.readline()
for i in range(RUNS):
    agent.invoke(f"{WHO} {i}", thread_id="t", backend=LOOP)
print("done", flush=True)

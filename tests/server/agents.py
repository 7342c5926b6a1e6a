"""Agents the server tests serve: deterministic models, and probes of what runs.

``Probe`` counts model calls started and the model calls and tools still in
progress, from the server's thread; tests read it from theirs (plain ints).
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.lowlevel

from deepactors import AssistantMessage, ToolCall, ToolMessage, ToolRuntime, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest


class Probe:
    """What the test can observe of a served agent, across threads."""

    def __init__(self) -> None:
        self.calls = 0
        self.active = 0
        self.release = threading.Event()  # lets a blocked tool finish
        self.seen = threading.Event()  # set by the client when it saw an event
        self.blocked = threading.Event()  # set while the blocking tool waits


def fan_out_agent(probe: Probe, **kwargs: Any) -> Any:
    """Main agent fans out to two researcher subagents; each writes progress and a note.

    The researchers' ``progress`` tool waits until the client has seen the first
    subagent event (``probe.seen``), so a test can prove events stream while the
    subagents are still working.
    """

    async def progress(topic: str, runtime: ToolRuntime) -> str:
        """Report progress on a topic.

        Args:
            topic: The topic.
        """
        runtime.write({"topic": topic, "phase": "working"})
        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(probe.seen.wait, abandon_on_cancel=True)
        return f"notes on {topic}"

    def researcher(request: ModelRequest) -> AssistantMessage:
        topic = request.messages[0].text
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="progress", args={"topic": topic})])
        return AssistantMessage(content=f"finding on {topic}")

    def main(request: ModelRequest) -> AssistantMessage:
        probe.calls += 1
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": t, "subagent_type": "researcher"})
                    for t in ("alpha", "beta")
                ]
            )
        return AssistantMessage(content="report: " + "; ".join(sorted(m.text for m in results)))

    sub = {
        "name": "researcher",
        "description": "researches one topic",
        "system_prompt": "research",
        "model": FunctionModel(researcher),
        "tools": [progress],
    }
    return create_deep_agent(FunctionModel(main), subagents=[sub], **kwargs)


def blocking_agent(probe: Probe, **kwargs: Any) -> Any:
    """First model call asks for ``wait``, a tool that blocks until released or cancelled;
    then the model answers with the text of the last user message."""

    async def wait(runtime: ToolRuntime) -> str:
        """Wait for the test to release it."""
        probe.active += 1
        try:
            runtime.write({"waiting": True})
            probe.blocked.set()
            await anyio.to_thread.run_sync(probe.release.wait, abandon_on_cancel=True)
            return "released"
        finally:
            probe.blocked.clear()
            probe.active -= 1

    async def model(request: ModelRequest) -> AssistantMessage:
        probe.calls += 1
        probe.active += 1
        try:
            await anyio.lowlevel.checkpoint()
            last = request.messages[-1]
            if not isinstance(last, ToolMessage) and "wait" in last.text:
                return AssistantMessage(tool_calls=[ToolCall(name="wait", args={})])
            users = [m for m in request.messages if m.role == "user"]
            return AssistantMessage(content=f"echo: {users[-1].text}")
        finally:
            probe.active -= 1

    return create_deep_agent(FunctionModel(model), tools=[wait], **kwargs)

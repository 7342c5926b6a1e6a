"""``agent.astream_events(..., version="v2")``: a run's events as LangChain's event dicts.

A deepagents script reads them as
``{"event": "on_chat_model_stream", "data": {"chunk": AIMessageChunk}, "name", "run_id",
"tags", "metadata", "parent_ids"}``. They are made from deepactors' typed events:

====================================  ===============================================
LangChain event                       from
====================================  ===============================================
``on_chain_start`` / ``on_chain_end``  a run (the agent, or a subagent) starting / ending
``on_chat_model_start``               a model call starting
``on_chat_model_stream``              each streamed piece (``data["chunk"]``)
``on_chat_model_end``                 the answer (``data["output"]``, an ``AIMessage``)
``on_tool_start`` / ``on_tool_end``   a tool call (``data["input"]`` / ``data["output"]``)
``on_custom_event``                   ``runtime.write(...)`` / a tool's stream writer
====================================  ===============================================

``metadata`` carries ``lc_agent_name``, ``langgraph_node`` and the actor ``path``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessageChunk

from ..events import (
    CustomEvent,
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from ._messages import to_langchain

__all__ = ["langchain_events"]


async def langchain_events(
    events: AsyncIterator[Event], *, tags: Sequence[str] = ()
) -> AsyncIterator[dict[str, Any]]:
    """LangChain's v2 event dicts for a run's typed events, in order."""
    runs: dict[str, str] = {}  # actor path -> the run id its events are under
    steps: dict[str, int] = {}  # actor path -> its current model call
    async for event in events:
        if isinstance(event, ModelCallStarted):
            steps[event.path] = event.step
        out = _convert(event, runs, list(tags), steps.get(event.path, 0))
        if out is not None:
            yield out


def _convert(
    event: Event, runs: dict[str, str], tags: list[str], step: int
) -> dict[str, Any] | None:
    path = event.path
    model_run = f"run-{event.run_id}-{step}"
    data: dict[str, object]
    match event:
        case RunStarted():
            runs[path] = event.run_id
            kind, name, run_id, node, data = "on_chain_start", _agent(path), event.run_id, "", {}
        case RunFinished():
            kind, name, run_id, node = "on_chain_end", _agent(path), event.run_id, ""
            data = {"output": {"outcome": event.outcome}}
        case ModelCallStarted():
            kind, name, run_id, node = (
                "on_chat_model_start",
                event.model or "model",
                model_run,
                "model",
            )
            data = {"input": {"step": event.step}}
        case ModelDelta() if event.kind != "tool_input":
            content: str | list[str | dict[str, object]] = event.text
            if event.kind == "thinking":
                content = [{"type": "thinking", "thinking": event.text, "index": event.index}]
            kind, name, run_id, node = "on_chat_model_stream", "model", model_run, "model"
            data = {"chunk": AIMessageChunk(content=content, id=model_run)}
        case ModelCallFinished():
            kind, name, run_id, node = (
                "on_chat_model_end",
                event.message.model or "model",
                model_run,
                "model",
            )
            data = {"output": to_langchain(event.message)}
        case ToolCallStarted():
            kind, name, run_id, node = "on_tool_start", event.call.name, event.call.id, "tools"
            data = {"input": dict(event.call.args)}
        case ToolCallFinished():
            kind, name, run_id, node = "on_tool_end", event.call.name, event.call.id, "tools"
            data = {"output": to_langchain(event.result), "input": dict(event.call.args)}
        case CustomEvent():
            kind, name, run_id, node = "on_custom_event", "custom", event.run_id, "tools"
            data = {"data": event.data}
        case _:
            return None
    return {
        "event": kind,
        "name": name,
        "run_id": run_id,
        "tags": tags,
        "metadata": {"lc_agent_name": _agent(path), "langgraph_node": node, "path": path},
        "parent_ids": _parents(path, runs),
        "data": data,
    }


def _agent(path: str) -> str:
    return path.rsplit("/", 1)[-1].partition(":")[2] or path


def _parents(path: str, runs: Mapping[str, str]) -> list[str]:
    parts = path.split("/")
    return [runs[p] for p in ("/".join(parts[: i + 1]) for i in range(len(parts) - 1)) if p in runs]

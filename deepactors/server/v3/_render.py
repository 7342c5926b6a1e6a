"""One run's typed events as the v3 protocol's events (before their envelope).

The state channels (``values``, ``updates``, ``custom``, ``tasks``,
``checkpoints``) and the model's message chunks come from the one renderer of
LangGraph's stream modes, :class:`~deepactors.langchain.views.LangGraphStream`; this
module only reshapes its parts: ``updates`` as ``{node, values}``, ``custom``
as ``{payload}``, and the message chunks as the content-block events
(``message-start``, ``content-block-start/delta/finish``, ``message-finish``)
the SDK's ``ChatModelStream`` assembles. ``tools`` and ``input.requested``
come straight from the tool and interrupt events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from ...events import Event, Interrupted, ToolCallFinished, ToolCallStarted
from ...langchain.views import (
    LangGraphStream,
    StreamPart,
    content_to_lc,
    interrupts_to_lc,
    namespace_of,
)
from ...messages import ToolMessage

__all__ = ["Out", "RunRenderer"]

_MODES = ("values", "updates", "messages", "custom", "tasks", "checkpoints")


@final
@dataclass(frozen=True, slots=True)
class Out:
    """A v3 event before its envelope (``seq``, ``event_id``, ``timestamp``).

    Attributes:
        method: The event's method (``values``, ``messages``, ``input.requested``...).
        namespace: The agent it is of: ``[]`` the root, a subagent's path below.
        data: ``params.data``.
        node: ``params.node``, where the event is of one node.
    """

    method: str
    namespace: list[str]
    data: object
    node: str | None = None


@dataclass(slots=True)
class _Message:
    """A message whose chunks are streaming: its open blocks by kind."""

    blocks: dict[str, int] = field(default_factory=dict)  # "text"/"reasoning" -> index
    text: dict[str, str] = field(default_factory=dict)
    next: int = 0


@final
class RunRenderer:
    """Turns one run's events, in order, into v3 events (see the module docstring).

    Args:
        thread_id: The thread's public id (put in the messages' metadata).
    """

    def __init__(self, thread_id: str) -> None:
        self._stream = LangGraphStream(_MODES, subgraphs=True, thread_id=thread_id)
        self._messages: dict[str, _Message] = {}

    def feed(self, event: Event) -> list[Out]:
        """The v3 events this event makes, in order."""
        ns = list(namespace_of(event.path))
        out: list[Out] = []
        if isinstance(event, ToolCallStarted):
            call = event.call
            started = {
                "event": "tool-started",
                "tool_call_id": call.id,
                "tool_name": call.name,
                "input": dict(call.args),
            }
            out.append(Out("tools", ns, started, "tools"))
        for part in self._stream.feed(event):
            out.extend(self._part(part))
        if isinstance(event, ToolCallFinished):
            out.append(Out("tools", ns, _tool_end(event.result), "tools"))
        elif isinstance(event, Interrupted):
            for pending in interrupts_to_lc(event.requests):
                data = {"interrupt_id": pending["id"], "value": pending["value"]}
                out.append(Out("input.requested", ns, data))
        return out

    def _part(self, part: StreamPart) -> list[Out]:
        ns = list(part.namespace)
        if part.mode == "messages":
            chunk, meta = part.data
            return self._chunk(ns, chunk, meta)
        if part.mode == "updates":
            # An interrupt's update is told as input.requested instead.
            return [
                Out("updates", ns, {"node": node, "values": values}, node)
                for node, values in part.data.items()
                if node != "__interrupt__"
            ]
        if part.mode == "custom":
            return [Out("custom", ns, {"payload": part.data})]
        return [Out(part.mode, ns, part.data)]

    def _chunk(self, ns: list[str], chunk: Mapping[str, Any], meta: Mapping[str, Any]) -> list[Out]:
        """A message chunk as content-block events (its message opened first,
        its blocks and the message finished by its last chunk)."""
        key = str(chunk["id"])
        node = meta.get("langgraph_node")
        out: list[Out] = []

        def emit(data: Mapping[str, object]) -> None:
            # Every event names its message, so concurrent messages route apart.
            out.append(Out("messages", ns, {**data, "id": key}, node))

        # A whole message (a tool's result) is one chunk, its own last.
        whole = not str(chunk.get("type", "")).endswith("Chunk")
        message = self._messages.get(key)
        if message is None:
            message = self._messages[key] = _Message()
            metadata = {"langgraph_node": node} if node else {}
            start = {"event": "message-start", "role": _ROLES.get(str(chunk.get("type")), "ai")}
            if chunk.get("tool_call_id"):
                start["tool_call_id"] = chunk["tool_call_id"]
            emit({**start, "metadata": metadata})
        for kind, piece in _pieces(chunk.get("content")):
            index = message.blocks.get(kind)
            if index is None:
                index = message.blocks[kind] = message.next
                message.next += 1
                message.text[kind] = ""
                emit({"event": "content-block-start", "index": index, "content": _block(kind, "")})
            message.text[kind] += piece
            delta = (
                {"type": "text-delta", "text": piece}
                if kind == "text"
                else {"type": "reasoning-delta", "reasoning": piece}
            )
            emit({"event": "content-block-delta", "index": index, "delta": delta})
        if not whole and chunk.get("chunk_position") != "last":
            return out
        for kind, index in message.blocks.items():
            block = _block(kind, message.text[kind])
            emit({"event": "content-block-finish", "index": index, "content": block})
        for call in chunk.get("tool_calls") or ():
            block = {"type": "tool_call", "id": call["id"], "name": call["name"]}
            block["args"] = call["args"]
            start = {**block, "type": "tool_call_chunk", "args": json.dumps(call["args"])}
            emit({"event": "content-block-start", "index": message.next, "content": start})
            emit({"event": "content-block-finish", "index": message.next, "content": block})
            message.next += 1
        for bad in chunk.get("invalid_tool_calls") or ():
            block = {**bad, "type": "invalid_tool_call"}
            emit({"event": "content-block-finish", "index": message.next, "content": block})
            message.next += 1
        finish: dict[str, object] = {"event": "message-finish"}
        if chunk.get("usage_metadata"):
            finish["usage"] = chunk["usage_metadata"]
        emit(finish)
        del self._messages[key]
        return out


_ROLES = {"tool": "tool", "human": "human", "system": "system"}


def _pieces(content: object) -> list[tuple[str, str]]:
    """A chunk's content as (kind, text) pieces: ``text`` and ``reasoning``."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    out: list[tuple[str, str]] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        text, thinking = block.get("text"), block.get("thinking")
        if block.get("type") == "text" and isinstance(text, str) and text:
            out.append(("text", text))
        elif block.get("type") == "thinking" and isinstance(thinking, str) and thinking:
            out.append(("reasoning", thinking))
    return out


def _block(kind: str, text: str) -> dict[str, str]:
    return {"type": "text", "text": text} if kind == "text" else {"type": kind, kind: text}


def tool_text(result: ToolMessage) -> str | list[dict[str, object]]:
    """A tool result's content as LangChain shows it (a string, or blocks)."""
    return content_to_lc(result.content)


def _tool_end(result: ToolMessage) -> dict[str, object]:
    if result.status == "error":
        content = tool_text(result)
        message = content if isinstance(content, str) else json.dumps(content)
        return {"event": "tool-error", "tool_call_id": result.tool_call_id, "message": message}
    return {
        "event": "tool-finished",
        "tool_call_id": result.tool_call_id,
        "output": tool_text(result),
    }

"""LangChain and LangGraph views of deepactors' messages, state, interrupts and events.

Pure functions and one small stateful adapter, shared by the agent facade
(``agent.astream(stream_mode=...)``) and the HTTP server (the LangGraph Agent
Protocol): whatever speaks LangChain's shapes to the outside goes through here.

* :func:`message_to_lc` / :func:`message_from_lc`: a message as LangChain's
  message dict (``type`` ``human``/``ai``/``tool``/``system``, ``content``,
  ``tool_calls`` with ``{"name", "args", "id", "type": "tool_call"}``,
  ``tool_call_id``, ``usage_metadata``...) and back.
* :func:`values_to_lc`: a state (or a run's result) as JSON: messages as
  LangChain dicts, files as deepagents' ``FileData``, todos as dicts, and
  ``__interrupt__`` as LangGraph's ``[{"value": ..., "id": ...}]``.
* :class:`LangGraphStream`: turns the typed event stream of a run into
  LangGraph's stream parts ``(namespace, mode, data)`` for the modes ``values``,
  ``updates``, ``messages`` (``messages-tuple``), ``custom``, ``events`` and
  ``debug``; a subagent at ``main/task-2:researcher`` streams under the
  namespace ``("task-2:researcher",)``.

This module sits just above messages, state, interrupts and events; it imports
nothing of the runtime, the facade or the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from .events import (
    CustomEvent,
    Event,
    Interrupted,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    RunFinished,
    StateUpdated,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
)
from .filediff import FileRecord
from .interrupts import interrupt_view
from .messages import (
    AssistantMessage,
    Content,
    Message,
    MessageLike,
    ToolCall,
    ToolMessage,
    Usage,
    to_message,
)
from .state import RemoveMessage, Todo

__all__ = [
    "STREAM_MODES",
    "LangGraphStream",
    "Namespace",
    "StreamMode",
    "StreamPart",
    "content_to_lc",
    "event_to_json",
    "interrupts_to_lc",
    "message_from_lc",
    "message_to_lc",
    "messages_to_lc",
    "namespace_of",
    "parse_stream_modes",
    "update_to_lc",
    "usage_to_lc",
    "values_to_lc",
]

StreamMode: TypeAlias = Literal["values", "updates", "messages", "custom", "events", "debug"]
STREAM_MODES: tuple[StreamMode, ...] = (
    "values",
    "updates",
    "messages",
    "custom",
    "events",
    "debug",
)
"""Modes :class:`LangGraphStream` produces (``messages-tuple`` is read as ``messages``)."""

Namespace: TypeAlias = tuple[str, ...]
"""A subgraph namespace: the actor path below the root, one part per level."""


class StreamPart(NamedTuple):
    """One part of a LangGraph stream: a tuple ``(namespace, mode, data)``.

    ``namespace`` is ``()`` for the root agent. ``data`` is JSON-ready, except
    for ``messages`` parts, whose data is a ``(message_chunk, metadata)`` pair.
    """

    namespace: Namespace
    mode: StreamMode
    data: Any


# -- messages ----------------------------------------------------------------------------


def content_to_lc(content: Content) -> str | list[dict[str, Any]]:
    """Message content in LangChain's form: text as is, blocks as Anthropic-style dicts."""
    if isinstance(content, str):
        return content
    return [block.model_dump(mode="json") for block in content]


def usage_to_lc(usage: Usage | None) -> dict[str, Any] | None:
    """Token counts as LangChain's ``usage_metadata`` (input includes cached tokens)."""
    if usage is None:
        return None
    total_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "input_tokens": total_in,
        "output_tokens": usage.output_tokens,
        "total_tokens": total_in + usage.output_tokens,
        "input_token_details": {
            "cache_read": usage.cache_read_tokens,
            "cache_creation": usage.cache_write_tokens,
        },
    }


def _tool_call_to_lc(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "args": dict(call.args), "id": call.id, "type": "tool_call"}


def _invalid_call_to_lc(call: ToolCall) -> dict[str, Any]:
    return {
        "name": call.name,
        "args": json.dumps(call.args) if call.args else None,
        "id": call.id,
        "error": call.error,
        "type": "invalid_tool_call",
    }


def message_to_lc(message: Message) -> dict[str, Any]:
    """A message as LangChain's message dict (what ``messages_to_dict`` would give).

    Every dict has ``type``, ``content``, ``id``, ``name``, ``additional_kwargs``
    and ``response_metadata``; an ``ai`` message adds ``tool_calls``,
    ``invalid_tool_calls`` (calls whose arguments could not be parsed) and
    ``usage_metadata``; a ``tool`` message adds ``tool_call_id``, ``status`` and
    the tool's ``name``.
    """
    out: dict[str, Any] = {
        "type": message.type,
        "content": content_to_lc(message.content),
        "id": message.id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    if isinstance(message, AssistantMessage):
        out["tool_calls"] = [_tool_call_to_lc(c) for c in message.tool_calls if c.error is None]
        out["invalid_tool_calls"] = [
            _invalid_call_to_lc(c) for c in message.tool_calls if c.error is not None
        ]
        out["usage_metadata"] = usage_to_lc(message.usage)
        meta = {"model_name": message.model, "stop_reason": message.stop_reason}
        out["response_metadata"] = {k: v for k, v in meta.items() if v is not None}
    elif isinstance(message, ToolMessage):
        out["name"] = message.name
        out["tool_call_id"] = message.tool_call_id
        out["status"] = message.status
        out["artifact"] = None
    return out


def messages_to_lc(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """:func:`message_to_lc` over a list."""
    return [message_to_lc(m) for m in messages]


def message_from_lc(data: MessageLike) -> Message:
    """A message from LangChain's message dict (or any shape :func:`to_message` takes).

    The inverse of :func:`message_to_lc`: cached-token details, the model name,
    the stop reason and unparsable tool calls come back too.

    Raises:
        InputError: Not a valid message; the error names the field.
    """
    if not isinstance(data, Mapping):
        return to_message(data)
    raw = dict(data)
    role = raw.get("type", raw.get("role"))
    if role in ("ai", "assistant", "AIMessageChunk"):
        raw["type"] = "ai"
        raw.pop("role", None)
        usage = raw.pop("usage_metadata", None)
        if isinstance(usage, Mapping) and "usage" not in raw:
            raw["usage"] = _usage_from_lc(usage)
        meta = raw.get("response_metadata")
        if isinstance(meta, Mapping):
            raw.setdefault("model", meta.get("model_name"))
            raw.setdefault("stop_reason", meta.get("stop_reason"))
        invalid = raw.pop("invalid_tool_calls", None) or []
        if invalid:
            raw["tool_calls"] = [*(raw.get("tool_calls") or []), *map(_invalid_from_lc, invalid)]
    return to_message(raw)


def _usage_from_lc(usage: Mapping[str, Any]) -> dict[str, int]:
    details = usage.get("input_token_details") or {}
    read = int(details.get("cache_read") or 0)
    write = int(details.get("cache_creation") or 0)
    return {
        "input_tokens": max(0, int(usage.get("input_tokens") or 0) - read - write),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "cache_read_tokens": read,
        "cache_write_tokens": write,
    }


def _invalid_from_lc(call: Mapping[str, Any]) -> dict[str, Any]:
    args = call.get("args")
    try:
        parsed = json.loads(args) if isinstance(args, str) else {}
    except ValueError:
        parsed = {}
    out = {
        "name": call.get("name") or "",
        "args": parsed if isinstance(parsed, dict) else {},
        "error": call.get("error") or "invalid tool call",
    }
    if call.get("id"):
        out["id"] = call["id"]
    return out


# -- state -------------------------------------------------------------------------------


def interrupts_to_lc(requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pending requests (``result["__interrupt__"]`` entries, or their ``to_dict``
    form) as LangGraph's interrupts: one ``{"value", "id"}`` per stop, the value
    being deepagents' ``{"action_requests": [...], "review_configs": [...]}``."""
    views = interrupt_view([_request_dict(r) for r in requests])
    out: dict[str, dict[str, Any]] = {}
    for view in views:
        out.setdefault(view.id, {"value": to_jsonable_python(view.value), "id": view.id})
    return list(out.values())


def _request_dict(request: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("id", "tool", "args", "path", "allowed_decisions", "description")
    return {k: request.get(k) for k in keys}


def _file_to_lc(record: FileRecord | None) -> dict[str, str] | None:
    return None if record is None else record.to_file_data()


def _jsonable(value: Any) -> Any:
    if isinstance(value, FileRecord):
        return value.to_file_data()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=repr)


def _channel_to_lc(name: str, value: Any) -> Any:
    match name:
        case "messages":
            return [
                {"type": "remove", "id": m.id} if isinstance(m, RemoveMessage) else message_to_lc(m)
                for m in value
            ]
        case "files":
            return {path: _file_to_lc(record) for path, record in value.items()}
        case "todos":
            return [t.model_dump(mode="json") if isinstance(t, Todo) else t for t in value]
        case "__interrupt__":
            return interrupts_to_lc(value)
        case _:
            return _jsonable(value)


def values_to_lc(values: Mapping[str, Any]) -> dict[str, Any]:
    """A state, or a run's result, as JSON in LangChain's shapes.

    ``usage`` (a run's token count, not a channel) is left out; ``__interrupt__``
    becomes LangGraph's interrupt list.
    """
    return {k: _channel_to_lc(k, v) for k, v in values.items() if k != "usage"}


def update_to_lc(update: Mapping[str, Any]) -> dict[str, Any]:
    """A state update as JSON: like :func:`values_to_lc`; a deleted file is ``None``
    and a removed message ``{"type": "remove", "id": ...}``."""
    return values_to_lc(update)


# -- events ------------------------------------------------------------------------------


def namespace_of(path: str) -> Namespace:
    """The LangGraph namespace of an actor path: its parts below the root."""
    return tuple(path.split("/")[1:])


def event_to_json(event: Event) -> dict[str, Any]:
    """A typed event as JSON: ``{"event": "model_delta", "path": ..., "run_id": ..., ...}``.

    Messages inside events keep deepactors' own shape (``role``...).
    """
    out: dict[str, Any] = {"event": _snake(type(event).__name__)}
    for name in _fields(type(event)):
        value = getattr(event, name)
        if isinstance(event, StateUpdated) and name in ("update", "values"):
            out[name] = values_to_lc(value)
        else:
            out[name] = _jsonable(value)
    return out


def _fields(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        names.extend(getattr(klass, "__slots__", ()))
    return tuple(dict.fromkeys(n for n in names if not n.startswith("_")))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def parse_stream_modes(modes: str | Sequence[str] | None) -> tuple[StreamMode, ...]:
    """Check stream modes; ``messages-tuple`` is read as ``messages``.

    Raises:
        ValueError: An unknown mode; the message lists the known ones.
    """
    if modes is None:
        return ("values",)
    items = [modes] if isinstance(modes, str) else list(modes)
    out: list[StreamMode] = []
    for mode in items:
        name = "messages" if mode == "messages-tuple" else mode
        if name not in STREAM_MODES:
            known = ", ".join([*STREAM_MODES, "messages-tuple"])
            raise ValueError(f"unknown stream mode {mode!r}; known: {known}")
        if name not in out:
            out.append(name)
    return tuple(out)


@dataclass(slots=True)
class _Actor:
    """What the adapter remembers of one actor between its events."""

    step: int = 0
    called: bool = False  # a model call has started (what came before was input)
    values: Mapping[str, Any] | None = None  # latest state not yet streamed
    update: dict[str, Any] = field(default_factory=dict)  # updates not yet streamed
    streamed: bool = False  # text of the current model call went out as chunks


class LangGraphStream:
    """Turns one run's typed events into LangGraph stream parts.

    Feed every event of the run, in order, to :meth:`feed`; it returns the parts
    to send (often none). ``values`` and ``updates`` follow LangGraph's steps: a
    model answer is one step, and everything else an actor applies until its next
    model call (a turn's tool results, hook updates, the input) is the next.

    Args:
        modes: The modes wanted (see :func:`parse_stream_modes`).
        subgraphs: Also stream subagents' parts, under their namespaces; without
            it only the root agent's parts are streamed.
        thread_id: Put in ``messages`` metadata.

    Raises:
        ValueError: An unknown mode.
    """

    def __init__(
        self,
        modes: str | Sequence[str] | None = "values",
        *,
        subgraphs: bool = False,
        thread_id: str | None = None,
    ) -> None:
        self.modes = parse_stream_modes(modes)
        self.subgraphs = subgraphs
        self.thread_id = thread_id
        self._actors: dict[str, _Actor] = {}
        self._state_modes = bool({"values", "updates"} & set(self.modes))

    def feed(self, event: Event) -> list[StreamPart]:
        """The parts this event produces, in order."""
        ns = namespace_of(event.path)
        if ns and not self.subgraphs:
            return self._bookkeeping(event)
        out: list[StreamPart] = []
        if "events" in self.modes or "debug" in self.modes:
            data = event_to_json(event)
            out.extend(StreamPart(ns, m, data) for m in ("events", "debug") if m in self.modes)
        match event:
            case StateUpdated():
                out.extend(self._state(ns, event))
            case ModelCallStarted():
                out.extend(self._flush(ns, event.path))
                actor = self._actor(event.path)
                actor.step, actor.called, actor.streamed = event.step, True, False
            case ModelDelta():
                if "messages" in self.modes and event.kind != "tool_input":
                    self._actor(event.path).streamed = True
                    out.append(self._delta(ns, event))
            case ModelCallFinished():
                if "messages" in self.modes:
                    out.append(self._answer(ns, event))
            case CustomEvent():
                if "custom" in self.modes:
                    out.append(StreamPart(ns, "custom", _jsonable(event.data)))
            case Interrupted():
                out.extend(self._flush(ns, event.path))
                out.extend(self._interrupt(ns, event.requests))
            case RunFinished():
                out.extend(self._flush(ns, event.path))
                self._actors.pop(event.path, None)
            case (
                SubagentFinished() | SubagentFailed() | SubagentCancelled() | SubagentInterrupted()
            ):
                out.extend(self._flush(namespace_of(event.child), event.child))
                self._actors.pop(event.child, None)
        return out

    def _bookkeeping(self, event: Event) -> list[StreamPart]:
        # A subagent's events are not streamed, but its actor's memory must end.
        if isinstance(
            event, SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted
        ):
            self._actors.pop(event.child, None)
        return []

    def _actor(self, path: str) -> _Actor:
        actor = self._actors.get(path)
        if actor is None:
            actor = self._actors[path] = _Actor()
        return actor

    def _state(self, ns: Namespace, event: StateUpdated) -> list[StreamPart]:
        if not self._state_modes and "messages" not in self.modes:
            return []
        actor = self._actor(event.path)
        out: list[StreamPart] = []
        answer = _is_answer(event.update)
        if answer:
            out.extend(self._flush(ns, event.path))
        elif "messages" in self.modes:
            for m in event.update.get("messages", ()):
                if isinstance(m, ToolMessage):
                    meta = self._metadata(event.path, "tools", actor.step)
                    out.append(StreamPart(ns, "messages", (message_to_lc(m), meta)))
        if not self._state_modes:
            return out
        actor.values = event.values
        _fold(actor.update, event.update)
        if answer:
            out.extend(self._flush(ns, event.path, node="model"))
        return out

    def _flush(self, ns: Namespace, path: str, *, node: str | None = None) -> list[StreamPart]:
        actor = self._actors.get(path)
        if actor is None or actor.values is None:
            return []
        out: list[StreamPart] = []
        if "updates" in self.modes and (actor.called or node is not None):
            name = node or ("tools" if _has_tool_result(actor.update) else "middleware")
            out.append(StreamPart(ns, "updates", {name: update_to_lc(actor.update)}))
        if "values" in self.modes:
            out.append(StreamPart(ns, "values", values_to_lc(actor.values)))
        actor.values, actor.update = None, {}
        return out

    def _interrupt(self, ns: Namespace, requests: Sequence[Mapping[str, Any]]) -> list[StreamPart]:
        data = {"__interrupt__": interrupts_to_lc(requests)}
        # As LangGraph's server does: an interrupt always reaches a client that
        # asked for state, as an update or else as values.
        if "updates" in self.modes:
            return [StreamPart(ns, "updates", data)]
        if "values" in self.modes:
            return [StreamPart(ns, "values", data)]
        return []

    def _metadata(self, path: str, node: str, step: int) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "langgraph_node": node,
            "langgraph_step": step,
            "langgraph_checkpoint_ns": "|".join(namespace_of(path)),
            "path": path,
        }
        if self.thread_id is not None:
            meta["thread_id"] = self.thread_id
        return meta

    def _chunk_id(self, event: Event) -> str:
        return f"run-{event.run_id}-{self._actor(event.path).step}"

    def _delta(self, ns: Namespace, event: ModelDelta) -> StreamPart:
        content: str | list[dict[str, Any]] = event.text
        if event.kind == "thinking":
            content = [{"type": "thinking", "thinking": event.text, "index": event.index}]
        chunk = _chunk(self._chunk_id(event), content)
        meta = self._metadata(event.path, "model", self._actor(event.path).step)
        return StreamPart(ns, "messages", (chunk, meta))

    def _answer(self, ns: Namespace, event: ModelCallFinished) -> StreamPart:
        """The end of a model call: the calls, usage and stop reason (and the text,
        when none of it was streamed), as the last chunk of the message."""
        message = event.message
        actor = self._actor(event.path)
        chunk = _chunk(
            self._chunk_id(event), "" if actor.streamed else content_to_lc(message.content)
        )
        calls = [c for c in message.tool_calls if c.error is None]
        chunk["tool_calls"] = [_tool_call_to_lc(c) for c in calls]
        chunk["tool_call_chunks"] = [
            {
                "name": c.name,
                "args": json.dumps(c.args),
                "id": c.id,
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(calls)
        ]
        chunk["invalid_tool_calls"] = [
            _invalid_call_to_lc(c) for c in message.tool_calls if c.error is not None
        ]
        chunk["usage_metadata"] = usage_to_lc(message.usage)
        meta = {"model_name": message.model, "stop_reason": message.stop_reason}
        chunk["response_metadata"] = {k: v for k, v in meta.items() if v is not None}
        chunk["chunk_position"] = "last"
        return StreamPart(ns, "messages", (chunk, self._metadata(event.path, "model", event.step)))


def _chunk(chunk_id: str, content: str | list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "AIMessageChunk",
        "content": content,
        "id": chunk_id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": [],
        "invalid_tool_calls": [],
        "tool_call_chunks": [],
        "usage_metadata": None,
    }


def _is_answer(update: Mapping[str, Any]) -> bool:
    return any(isinstance(m, AssistantMessage) for m in update.get("messages") or ())


def _has_tool_result(update: Mapping[str, Any]) -> bool:
    return any(isinstance(m, ToolMessage) for m in update.get("messages") or ())


def _fold(into: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Gather the updates of one step: messages append, files merge, the rest replace."""
    for name, value in update.items():
        if name == "messages":
            into["messages"] = [*into.get("messages", ()), *value]
        elif name == "files" and isinstance(value, Mapping):
            into["files"] = {**into.get("files", {}), **value}
        else:
            into[name] = value

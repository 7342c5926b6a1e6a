"""LangChain views of messages, state, interrupts and events (see the package)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ...events import Event, StateUpdated
from ...filediff import FileRecord
from ...interrupts import interrupt_view
from ...messages import (
    AssistantMessage,
    Content,
    Message,
    MessageLike,
    ToolCall,
    ToolMessage,
    Usage,
    to_message,
)
from ...state import RemoveMessage, Todo

__all__ = [
    "Namespace",
    "content_to_lc",
    "event_to_json",
    "interrupts_to_lc",
    "invalid_call_to_lc",
    "jsonable",
    "message_from_lc",
    "message_to_lc",
    "messages_to_lc",
    "namespace_of",
    "tool_call_to_lc",
    "update_to_lc",
    "usage_to_lc",
    "values_to_lc",
]

Namespace: TypeAlias = tuple[str, ...]
"""A subgraph namespace: the actor path below the root, one part per level."""


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


def tool_call_to_lc(call: ToolCall) -> dict[str, Any]:
    """A tool call as LangChain's ``{"name", "args", "id", "type": "tool_call"}``."""
    return {"name": call.name, "args": dict(call.args), "id": call.id, "type": "tool_call"}


def invalid_call_to_lc(call: ToolCall) -> dict[str, Any]:
    """A call whose arguments could not be parsed, as LangChain's ``invalid_tool_call``."""
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
        out["tool_calls"] = [tool_call_to_lc(c) for c in message.tool_calls if c.error is None]
        out["invalid_tool_calls"] = [
            invalid_call_to_lc(c) for c in message.tool_calls if c.error is not None
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


def _invalid_from_lc(call: Mapping[str, object]) -> dict[str, object]:
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


def interrupts_to_lc(requests: Sequence[Mapping[str, object]]) -> list[dict[str, Any]]:
    """Pending requests (``result["__interrupt__"]`` entries, or their ``to_dict``
    form) as LangGraph's interrupts: one ``{"value", "id"}`` per stop, the value
    being deepagents' ``{"action_requests": [...], "review_configs": [...]}``."""
    views = interrupt_view([_request_dict(r) for r in requests])
    out: dict[str, dict[str, object]] = {}
    for view in views:
        out.setdefault(view.id, {"value": to_jsonable_python(view.value), "id": view.id})
    return list(out.values())


def _request_dict(request: Mapping[str, object]) -> dict[str, object]:
    keys = ("id", "tool", "args", "path", "allowed_decisions", "description")
    return {k: request.get(k) for k in keys}


def _file_to_lc(record: FileRecord | None) -> dict[str, str] | None:
    return None if record is None else record.to_file_data()


def jsonable(value: Any) -> Any:
    """Any value as JSON-ready data (files as ``FileData``, models dumped)."""
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
            return jsonable(value)


def values_to_lc(values: Mapping[str, object], *, objects: bool = False) -> dict[str, Any]:
    """A state, or a run's result, as LangGraph shows it: the one rendering of a state.

    ``usage`` and ``budget`` (reports of a run, not channels) are left out.
    As JSON in LangChain's shapes (the server, stream parts sent as JSON):
    messages as LangChain's message dicts, files as ``FileData``,
    ``__interrupt__`` as LangGraph's interrupt list. With ``objects``, the
    channels keep deepactors' own objects (``astream``'s parts, and the
    LangChain facade, which turns the messages into LangChain's objects).
    """
    if objects:
        return {k: v for k, v in values.items() if k not in _RUN_REPORTS}
    return {k: _channel_to_lc(k, v) for k, v in values.items() if k not in _RUN_REPORTS}


_RUN_REPORTS = frozenset({"usage", "budget"})


def update_to_lc(update: Mapping[str, object]) -> dict[str, Any]:
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
            out[name] = jsonable(value)
    return out


def _fields(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        names.extend(getattr(klass, "__slots__", ()))
    return tuple(dict.fromkeys(n for n in names if not n.startswith("_")))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()

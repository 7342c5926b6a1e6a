"""A run's events as ACP ``session/update`` notifications, and a thread's history too.

The agent's own events make the turn an editor shows: its text
(``agent_message_chunk``) and reasoning (``agent_thought_chunk``) as they
stream, each tool call (``tool_call``, with its kind and the files it touches
as locations, then ``tool_call_update`` as it runs and ends, its result as
content), and its plan (``plan``, from the todos). A subagent is its ``task``
call, whose result is the subagent's answer: its own chatter stays out of the
editor's transcript.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core.jsonvalue import JSONObject, JSONValue
from ..events import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    TodosUpdated,
    ToolCallFinished,
    ToolCallStarted,
)
from ..messages import AssistantMessage, Message, ThinkingBlock, ToolCall, ToolMessage, UserMessage
from ..state import Todo

__all__ = ["SessionUpdates", "history_updates", "tool_call_update"]

_KINDS = {
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "ls": "search",
    "glob": "search",
    "grep": "search",
    "execute": "execute",
    "write_todos": "think",
    "task": "think",
    "fetch": "fetch",
    "web_fetch": "fetch",
    "http_request": "fetch",
}
_PATH_ARGS = ("file_path", "path")


def tool_call_update(
    call: ToolCall | Mapping[str, Any], real_path: Callable[[str], str]
) -> JSONObject:
    """An ACP ``ToolCall`` for one of our calls (or a pending request's dict):
    its title, kind, raw input and the files it touches."""
    if isinstance(call, ToolCall):
        call_id, name, args = call.id, call.name, dict(call.args)
    else:
        call_id, name, args = str(call["id"]), str(call["tool"]), dict(call["args"])
    out: JSONObject = {
        "toolCallId": call_id,
        "title": _title(name, args),
        "kind": _KINDS.get(name, "other"),
        "rawInput": args,
    }
    locations: list[JSONValue] = [
        {"path": real_path(args[key])} for key in _PATH_ARGS if isinstance(args.get(key), str)
    ]
    if locations:
        out["locations"] = locations
    return out


def _title(name: str, args: Mapping[str, object]) -> str:
    match name:
        case "execute":
            return f"execute: {args.get('command', '')}"
        case "task":
            return f"{args.get('subagent_type', 'subagent')}: {args.get('description', '')}"
    for key in (*_PATH_ARGS, "pattern"):
        value = args.get(key)
        if isinstance(value, str):
            return f"{name} {value}"
    return name


def _text_content(text: str) -> JSONObject:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _plan(todos: Sequence[Todo | Mapping[str, Any]]) -> JSONObject:
    entries: list[JSONValue] = []
    for todo in todos:
        data = todo.model_dump() if isinstance(todo, Todo) else dict(todo)
        entries.append({"content": data["content"], "priority": "medium", "status": data["status"]})
    return {"sessionUpdate": "plan", "entries": entries}


def _result_update(call_id: str, result: ToolMessage) -> JSONObject:
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed" if result.status == "error" else "completed",
        "content": [_text_content(result.text)],
        "rawOutput": result.text,
    }


@dataclass(slots=True)
class SessionUpdates:
    """Renders one turn's events as ``session/update`` contents (see the module docstring).

    Args:
        root: The path of the agent itself (its name).
        real_path: The editor's path of a virtual one (for locations).
    """

    root: str
    real_path: Callable[[str], str]
    _text_sent: bool = False
    _thought_sent: bool = False
    _announced: set[str] = field(default_factory=set)

    def updates(self, event: Event) -> list[JSONObject]:
        """The updates for one event (the agent's own; subagents' are left out)."""
        if event.path != self.root:
            return []
        match event:
            case ModelCallStarted():
                self._text_sent = self._thought_sent = False
            case ModelDelta(kind="text", text=text) if text:
                self._text_sent = True
                return [_chunk("agent_message_chunk", text)]
            case ModelDelta(kind="thinking", text=text) if text:
                self._thought_sent = True
                return [_chunk("agent_thought_chunk", text)]
            case ModelCallFinished(message=message):
                return self._answer(message)
            case ToolCallStarted(call=call):
                out = [] if call.id in self._announced else [self._announce(call)]
                status = {"sessionUpdate": "tool_call_update", "toolCallId": call.id}
                return [*out, {**status, "status": "in_progress"}]
            case ToolCallFinished(call=call, result=result):
                out = [] if call.id in self._announced else [self._announce(call)]
                return [*out, _result_update(call.id, result)]
            case TodosUpdated(todos=todos):
                return [_plan(todos)]
        return []

    def _announce(self, call: ToolCall) -> JSONObject:
        self._announced.add(call.id)
        return {
            "sessionUpdate": "tool_call",
            **tool_call_update(call, self.real_path),
            "status": "pending",
        }

    def _answer(self, message: AssistantMessage) -> list[JSONObject]:
        out: list[JSONObject] = []
        thinking = _thinking(message)
        if thinking and not self._thought_sent:
            out.append(_chunk("agent_thought_chunk", thinking))
        if message.text and not self._text_sent:
            out.append(_chunk("agent_message_chunk", message.text))
        out += [self._announce(call) for call in message.tool_calls]
        return out


def history_updates(
    messages: Sequence[Message], real_path: Callable[[str], str]
) -> list[JSONObject]:
    """A saved conversation as the updates that show it again (``session/load``)."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    out: list[JSONObject] = []
    for message in messages:
        if isinstance(message, UserMessage) and message.text:
            out.append(_chunk("user_message_chunk", message.text))
        elif isinstance(message, AssistantMessage):
            if message.text:
                out.append(_chunk("agent_message_chunk", message.text))
            for call in message.tool_calls:
                out.append(
                    {
                        "sessionUpdate": "tool_call",
                        **tool_call_update(call, real_path),
                        "status": "pending",
                    }
                )
                result = results.get(call.id)
                if result is not None:
                    out.append(_result_update(call.id, result))
    return out


def _chunk(kind: str, text: str) -> JSONObject:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _thinking(message: AssistantMessage) -> str:
    if isinstance(message.content, str):
        return ""
    return "".join(b.thinking for b in message.content if isinstance(b, ThinkingBlock))

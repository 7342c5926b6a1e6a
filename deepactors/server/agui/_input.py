"""AG-UI's ``RunAgentInput``: what a run starts with, and how a resume answers.

An AG-UI client sends the whole conversation with every run; the server's
thread already holds it. What a run takes from it:

- a thread the server does not hold yet: every message (so a conversation begun
  elsewhere carries on here), assistant tool calls and their results included;
- a thread it holds: the user messages at the end of the list (after the last
  message that is not the user's), less those it holds already (by id);

and ``resume``: one entry per interrupt (an interrupt's id is its tool call's),
whose ``payload`` is a decision (``{"type": "approve"}``, ``{"type": "edit",
"args": {...}}``, ``{"type": "reject", "message": "..."}``, ``{"type":
"respond", "message": "..."}``, or ``true`` / ``false`` for approve / reject);
a ``cancelled`` entry rejects the call. ``forwardedProps.hideSubagents``
(``true`` or a list of subagent types) leaves those subagents' own events out
of the stream. Frontend ``tools``, ``context`` and client ``state`` are not
used: the agent's tools and the thread's state are the server's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ...interrupts import DECISIONS
from ...messages import Message

__all__ = ["ResumeEntry", "RunAgentInput", "decisions_of", "input_messages"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ResumeEntry(_Wire):
    """An answer to one interrupt."""

    interrupt_id: str = Field(alias="interruptId", min_length=1)
    status: Literal["resolved", "cancelled"]
    payload: object = None


class RunAgentInput(_Wire):
    """The body of an AG-UI run request (``@ag-ui/client``'s ``HttpAgent``)."""

    thread_id: str = Field(alias="threadId", min_length=1, max_length=256)
    run_id: str = Field(alias="runId", min_length=1, max_length=256)
    messages: list[dict[str, object]] = Field(default_factory=list)
    resume: list[ResumeEntry] | None = None
    forwarded_props: object = Field(default=None, alias="forwardedProps")
    state: object = None
    tools: list[object] = Field(default_factory=list)
    context: list[object] = Field(default_factory=list)

    def hide_subagents(self) -> object:
        """``forwardedProps.hideSubagents``, as the client sent it (None: absent)."""
        props = self.forwarded_props
        return props.get("hideSubagents") if isinstance(props, Mapping) else None


def input_messages(
    client: Sequence[Mapping[str, object]], saved: Sequence[Message]
) -> list[dict[str, object]]:
    """The messages a run takes from the client's list (see the module docstring).

    Raises:
        HTTPException: 422, a message this server cannot take (naming it).
    """
    if not saved:
        return _history(client)
    known = {m.id for m in saved}
    tail: list[Mapping[str, object]] = []
    for message in reversed(client):
        if message.get("role") != "user":
            break
        tail.append(message)
    return [_user(m) for m in reversed(tail) if m.get("id") not in known]


def _history(client: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """A whole conversation, in our message dicts."""
    out: list[dict[str, object]] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for the results
    for message in client:
        role = message.get("role")
        match role:
            case "user":
                out.append(_user(message))
            case "system" | "developer":
                out.append({**_id(message), "role": "system", "content": _text(message)})
            case "assistant":
                calls: list[dict[str, object]] = []
                for call in _objects(message.get("toolCalls")):
                    function = call.get("function")
                    function = function if isinstance(function, Mapping) else {}
                    name = str(function.get("name", ""))
                    names[str(call.get("id"))] = name
                    calls.append({"id": call.get("id"), "name": name, "args": _args(function)})
                out.append(
                    {
                        **_id(message),
                        "role": "assistant",
                        "content": _text(message),
                        "tool_calls": calls,
                    }
                )
            case "tool":
                call_id = str(message.get("toolCallId", ""))
                out.append(
                    {
                        **_id(message),
                        "role": "tool",
                        "tool_call_id": call_id,
                        "name": names.get(call_id, "tool"),
                        "content": _text(message),
                        "status": "error" if message.get("error") else "success",
                    }
                )
            case "activity" | "reasoning":
                continue  # what a UI showed, not what was said
            case _:
                raise HTTPException(422, f"messages: unknown role {role!r}")
    return out


def _objects(value: object) -> list[Mapping[str, object]]:
    """The objects of a JSON list (none if it is not one)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _id(message: Mapping[str, object]) -> dict[str, str]:
    given = message.get("id")
    return {"id": given} if isinstance(given, str) and given else {}


def _text(message: Mapping[str, object]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _args(function: Mapping[str, object]) -> dict[str, object]:
    raw = function.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _user(message: Mapping[str, object]) -> dict[str, object]:
    content = message.get("content")
    if isinstance(content, str):
        return {**_id(message), "role": "user", "content": content}
    if not isinstance(content, list):
        raise HTTPException(422, "messages: a user message's content is text or a list of parts")
    return {**_id(message), "role": "user", "content": [_part(p) for p in content]}


def _part(part: object) -> dict[str, object]:
    """One part of a user message as one of our content blocks."""
    if not isinstance(part, Mapping):
        raise HTTPException(422, f"messages: a content part is an object, not {part!r}")
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "image":
        source = part.get("source")
        source = source if isinstance(source, Mapping) else {}
        if source.get("type") == "data":
            mime = source.get("mimeType") or "image/png"
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": mime, "data": source.get("value")},
            }
        if source.get("type") == "url":
            return {"type": "image", "source": {"type": "url", "url": source.get("value")}}
    if kind == "binary" and str(part.get("mimeType", "")).startswith("image/"):
        if part.get("data"):
            source = {"type": "base64", "media_type": part["mimeType"], "data": part["data"]}
            return {"type": "image", "source": source}
        if part.get("url"):
            return {"type": "image", "source": {"type": "url", "url": part["url"]}}
    raise HTTPException(
        422, f"messages: content parts of type {kind!r} are not supported (text and images are)"
    )


def decisions_of(resume: Sequence[ResumeEntry]) -> dict[str, dict[str, object]]:
    """The resume entries as decisions by request id (the runtime checks them
    against what the thread waits for).

    Raises:
        HTTPException: 422, a payload that is not a decision.
    """
    out: dict[str, dict[str, object]] = {}
    for entry in resume:
        if entry.status == "cancelled":
            out[entry.interrupt_id] = {"type": "reject", "message": "the user cancelled it"}
            continue
        payload = entry.payload
        if payload is None or payload is True:
            out[entry.interrupt_id] = {"type": "approve"}
        elif payload is False:
            out[entry.interrupt_id] = {"type": "reject"}
        elif isinstance(payload, Mapping) and payload.get("type") in DECISIONS:
            out[entry.interrupt_id] = dict(payload)
        else:
            raise HTTPException(
                422,
                f"resume[{entry.interrupt_id!r}].payload: a decision "
                f'({{"type": "approve" | "edit" | "reject" | "respond", ...}}) or a bool, '
                f"not {payload!r}",
            )
    return out

"""The AI SDK's chat request (``useChat``'s ``DefaultChatTransport``): what a run takes.

The body is ``{"id": <chat id>, "messages": [UIMessage...], "trigger": ...}``
(plus what the app adds with the transport's ``body``). The chat id is the
thread; the client sends the whole conversation, and a run takes:

- approvals: when the last message is the assistant's with tool parts in the
  ``approval-responded`` state (``addToolApprovalResponse``), the run resumes
  the thread with those decisions (approved: run it; denied: reject it, the
  reason for the model to read);
- otherwise the new user messages, as AG-UI's input does (a thread the server
  does not hold yet takes the whole conversation's text): text parts, and
  ``file`` parts that are images (a data URL or a URL).

``hideSubagents`` in the body (``true`` or a list of subagent types) leaves
those subagents' own parts out of the stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ...messages import Message

__all__ = ["ChatRequest", "approvals_of", "decisions_of", "input_messages"]


class ChatRequest(BaseModel):
    """The body ``useChat`` posts."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str = Field(min_length=1, max_length=256)
    messages: list[dict[str, object]] = Field(default_factory=list)
    trigger: Literal["submit-message", "regenerate-message", "resume-stream"] = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")
    hide_subagents: object = Field(default=None, alias="hideSubagents")


def approvals_of(messages: Sequence[Mapping[str, object]]) -> dict[str, tuple[bool, str | None]]:
    """The approvals answered in the last message (the assistant's): approval
    id to (approved, reason). Empty when it has none."""
    if not messages or messages[-1].get("role") != "assistant":
        return {}
    out: dict[str, tuple[bool, str | None]] = {}
    for part in _parts(messages[-1]):
        approval = part.get("approval")
        if part.get("state") != "approval-responded" or not isinstance(approval, Mapping):
            continue
        approval_id, reason = approval.get("id"), approval.get("reason")
        if isinstance(approval_id, str):
            given = reason if isinstance(reason, str) else None
            out[approval_id] = (bool(approval.get("approved")), given)
    return out


def decisions_of(approvals: Mapping[str, tuple[bool, str | None]]) -> dict[str, dict[str, str]]:
    """Approvals as decisions by request id (an approval's id is its call's)."""
    return {
        call_id: (
            {"type": "approve"}
            if approved
            else {"type": "reject", "message": reason or "the user denied it"}
        )
        for call_id, (approved, reason) in approvals.items()
    }


def input_messages(
    client: Sequence[Mapping[str, object]], saved: Sequence[Message]
) -> list[dict[str, object]]:
    """The messages a run takes from the chat (see the module docstring).

    Raises:
        HTTPException: 422, a part this server cannot take.
    """
    if not saved:
        return [m for m in (_message(m) for m in client) if m is not None]
    known = {m.id for m in saved}
    tail: list[Mapping[str, object]] = []
    for message in reversed(client):
        if message.get("role") != "user":
            break
        tail.append(message)
    out = [_message(m) for m in reversed(tail) if m.get("id") not in known]
    return [m for m in out if m is not None]


def _parts(message: Mapping[str, object]) -> list[Mapping[str, object]]:
    """A message's parts that are objects (none if ``parts`` is not a list)."""
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []


def _message(message: Mapping[str, object]) -> dict[str, object] | None:
    role = message.get("role")
    parts = _parts(message)
    given = message.get("id")
    head: dict[str, object] = {"id": given} if isinstance(given, str) and given else {}
    if role == "user":
        content = [_part(p) for p in parts if _kept(p)]
        if all(block["type"] == "text" for block in content):  # plain text, as typed
            return {**head, "role": "user", "content": "".join(str(b["text"]) for b in content)}
        return {**head, "role": "user", "content": content}
    if role in ("assistant", "system"):
        text = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
        return {**head, "role": role, "content": text} if text else None
    raise HTTPException(422, f"messages: unknown role {role!r}")


def _kept(part: Mapping[str, object]) -> bool:
    # What a UI adds for itself (step marks, data parts) is not what the user said.
    kind = str(part.get("type", ""))
    return kind in ("text", "file")


def _part(part: Mapping[str, object]) -> dict[str, object]:
    if part.get("type") == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    media = str(part.get("mediaType", ""))
    url = str(part.get("url", ""))
    if media.startswith("image/"):
        prefix = f"data:{media};base64,"
        if url.startswith(prefix):
            source = {"type": "base64", "media_type": media, "data": url[len(prefix) :]}
            return {"type": "image", "source": source}
        if url.startswith(("http://", "https://")):
            return {"type": "image", "source": {"type": "url", "url": url}}
    raise HTTPException(
        422, f"messages: file parts of type {media or '?'!r} are not supported (images are)"
    )

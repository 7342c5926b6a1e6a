"""A2A 1.0's JSON shapes (the ProtoJSON of ``a2a.proto``, as ``a2a-sdk`` 1.x reads them).

Field names are lowerCamelCase, enums their names (``TASK_STATE_COMPLETED``,
``ROLE_AGENT``), a ``oneof`` one of its fields. A task is one run of the
server: its id the run's, its ``contextId`` the run's thread.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence

from starlette.exceptions import HTTPException

from .._records import RunRecord
from .._wire_json import RunStatus

__all__ = [
    "PROTOCOL_VERSION",
    "agent_message",
    "artifact",
    "card",
    "content_of",
    "state_of",
    "status",
    "task",
]

PROTOCOL_VERSION = "1.0"
"""The A2A version served."""

_STATES: dict[RunStatus, str] = {
    "pending": "TASK_STATE_SUBMITTED",
    "running": "TASK_STATE_WORKING",
    "success": "TASK_STATE_COMPLETED",
    "error": "TASK_STATE_FAILED",
    "timeout": "TASK_STATE_FAILED",
    "interrupted": "TASK_STATE_CANCELED",
}
TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)


def state_of(run: RunRecord) -> str:
    """The task state of a run (a run stopped for decisions: input required)."""
    if run.status == "success" and (run.result or {}).get("__interrupt__"):
        return "TASK_STATE_INPUT_REQUIRED"
    return _STATES[run.status]


def agent_message(
    text: str, *, task_id: str, context_id: str, message_id: str
) -> dict[str, object]:
    """A message of the agent's, one text part."""
    return {
        "messageId": message_id,
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    }


def status(state: str, message: Mapping[str, object] | None = None) -> dict[str, object]:
    """A ``TaskStatus``."""
    out: dict[str, object] = {"state": state}
    if message is not None:
        out["message"] = dict(message)
    return out


def artifact(text: str, *, artifact_id: str = "answer") -> dict[str, object]:
    """The task's answer as an ``Artifact`` of one text part."""
    return {"artifactId": artifact_id, "name": "answer", "parts": [{"text": text}]}


def task(
    run: RunRecord,
    *,
    state: str,
    history: Sequence[Mapping[str, object]] = (),
    answer: str | None = None,
    message: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """A ``Task`` for one run."""
    out: dict[str, object] = {
        "id": run.run_id,
        "contextId": run.thread.thread_id,
        "status": status(state, message),
    }
    if answer is not None:
        out["artifacts"] = [artifact(answer)]
    if history:
        out["history"] = [dict(m) for m in history]
    return out


def card(
    *, name: str, description: str, url: str, skills: Sequence[Mapping[str, object]]
) -> dict[str, object]:
    """The assistant's ``AgentCard``: JSON-RPC at ``url``, streaming."""
    return {
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
        ],
        "version": "1",
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [dict(s) for s in skills],
    }


def content_of(message: Mapping[str, object]) -> str | list[dict[str, object]]:
    """A user message's parts as our content (text, JSON data as text, images).

    Raises:
        HTTPException: 422, a part of a kind not taken.
    """
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise HTTPException(422, "message.parts: at least one part")
    blocks: list[dict[str, object]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            raise HTTPException(422, "message.parts: objects")
        media = str(part.get("mediaType", ""))
        if isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif "data" in part:
            blocks.append({"type": "text", "text": json.dumps(part["data"], ensure_ascii=False)})
        elif media.startswith("image/") and isinstance(part.get("raw"), str):
            base64.b64decode(part["raw"], validate=True)
            source = {"type": "base64", "media_type": media, "data": part["raw"]}
            blocks.append({"type": "image", "source": source})
        elif media.startswith("image/") and isinstance(part.get("url"), str):
            blocks.append({"type": "image", "source": {"type": "url", "url": part["url"]}})
        else:
            raise HTTPException(422, f"message.parts: a part this agent does not take: {part!r}")
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(str(b["text"]) for b in blocks)
    return blocks

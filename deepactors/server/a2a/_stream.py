"""A run's events as A2A ``SendStreamingMessage`` responses (and a finished run as a task).

The stream opens with the task (``submitted``), goes ``working`` when the run
starts, sends the agent's text as it streams (an artifact per model call,
``append``-ed chunk by chunk, ``lastChunk`` when the call answered), tool calls
and subagents as ``working`` status updates whose ``metadata.deepactors`` says
what happened, and ends with the task's final status: ``completed`` (its
message the answer), ``input-required`` (the calls waiting for a human, in its
metadata), ``canceled`` or ``failed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...events import (
    Event,
    Interrupted,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    RunStarted,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentSpawned,
    ToolCallFinished,
    ToolCallStarted,
)
from ...langchain.views import event_to_json
from .._protocol_runs import Outcome
from .._records import RunRecord
from ._wire import agent_message, status, task

__all__ = ["A2aStream", "answer_of", "frame", "pending_message"]

_PROGRESS = (
    ToolCallStarted,
    ToolCallFinished,
    SubagentSpawned,
    SubagentFinished,
    SubagentFailed,
    SubagentCancelled,
)


def frame(request_id: object, result: Mapping[str, object]) -> bytes:
    """One JSON-RPC response as a server-sent event."""
    body = {"jsonrpc": "2.0", "id": request_id, "result": dict(result)}
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=repr)
    return f"data: {data}\n\n".encode()


def answer_of(result: Mapping[str, object] | None) -> str:
    """The last answer of the agent in a run's values (LangChain's message shapes)."""
    messages = (result or {}).get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(message, Mapping):
            continue
        if message.get("type") == "ai" and not message.get("tool_calls"):
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(b.get("text", "") for b in content or () if isinstance(b, Mapping))
    return ""


def pending_message(
    requests: Sequence[Mapping[str, object]], *, task_id: str, context_id: str
) -> dict[str, object]:
    """The ``input-required`` status message: which calls wait, and how to answer."""
    names = ", ".join(f"{r['tool']}({json.dumps(r['args'])})" for r in requests)
    text = (
        f"Waiting for a decision on {names}. Reply to this task with 'approve' or "
        'with why not, or with a data part {"decisions": [...]}.'
    )
    message = agent_message(
        text, task_id=task_id, context_id=context_id, message_id=f"{task_id}-input"
    )
    message["metadata"] = {"deepactors": {"requests": [dict(r) for r in requests]}}
    return message


@dataclass(slots=True)
class A2aStream:
    """Renders one run's events as A2A stream responses (see the module docstring).

    Args:
        request_id: The JSON-RPC request's id (every response carries it).
        run: The run (the task).
        user: The user's message, as sent (the task's history).
        root: The path of the run's top actor.
    """

    request_id: object
    run: RunRecord
    user: Mapping[str, object]
    root: str
    _working: bool = False
    _artifact: str | None = None
    _streamed: bool = False
    _last: str = ""
    _requests: list[Mapping[str, object]] = field(default_factory=list)

    @property
    def _ids(self) -> dict[str, str]:
        return {"taskId": self.run.run_id, "contextId": self.run.thread.thread_id}

    def opening(self) -> bytes:
        """The task, submitted."""
        submitted = task(self.run, state="TASK_STATE_SUBMITTED", history=[self.user])
        return frame(self.request_id, {"task": submitted})

    def feed(self, event: Event) -> bytes:
        """The responses for one event."""
        return b"".join(frame(self.request_id, r) for r in self.responses(event))

    def responses(self, event: Event) -> list[dict[str, object]]:
        """The ``StreamResponse`` results for one event."""
        out: list[dict[str, object]] = []
        if not self._working and isinstance(event, RunStarted):
            self._working = True
            out.append({"statusUpdate": {**self._ids, "status": status("TASK_STATE_WORKING")}})
        if isinstance(event, _PROGRESS):
            update = {**self._ids, "status": status("TASK_STATE_WORKING")}
            update["metadata"] = {"deepactors": event_to_json(event)}
            return [*out, {"statusUpdate": update}]
        if event.path != self.root:
            return out
        match event:
            case ModelCallStarted():
                self._artifact = f"{event.run_id}-{event.step}"
                self._streamed = False
            case ModelDelta(kind="text", text=text) if text and self._artifact:
                out.append(self._chunk(text, last=False))
                self._streamed = True
            case ModelCallFinished(message=message):
                self._last = message.text
                if self._artifact is not None and (self._streamed or message.text):
                    out.append(self._chunk("" if self._streamed else message.text, last=True))
                self._artifact = None
            case Interrupted(requests=requests):
                self._requests = list(requests)
        return out

    def _chunk(self, text: str, *, last: bool) -> dict[str, object]:
        append = self._streamed
        artifact = {"artifactId": self._artifact, "name": "text", "parts": [{"text": text}]}
        return {
            "artifactUpdate": {
                **self._ids,
                "artifact": artifact,
                "append": append,
                "lastChunk": last,
            }
        }

    def closing(self, outcome: Outcome) -> bytes:
        """The task's final status."""
        ids = self._ids
        message: dict[str, object] | None
        match outcome.status:
            case "interrupted":
                state, message = "TASK_STATE_CANCELED", None
            case "error" | "timeout":
                error = outcome.error or {}
                text = str(error.get("message") or outcome.status)
                state = "TASK_STATE_FAILED"
                message = agent_message(text, message_id=f"{ids['taskId']}-error", **_args(ids))
            case _ if self._requests:
                state = "TASK_STATE_INPUT_REQUIRED"
                message = pending_message(self._requests, **_args(ids))
            case _:
                state = "TASK_STATE_COMPLETED"
                message = agent_message(
                    self._last, message_id=f"{ids['taskId']}-answer", **_args(ids)
                )
        return frame(self.request_id, {"statusUpdate": {**ids, "status": status(state, message)}})


def _args(ids: Mapping[str, str]) -> dict[str, str]:
    return {"task_id": ids["taskId"], "context_id": ids["contextId"]}

"""A run's events as the AI SDK's UI message stream (``ai`` 7, ``@ai-sdk/react`` ``useChat``).

One :class:`AiSdkTranslator` per response; the response is one assistant
message (a resumed one continues the message its client shows). What maps to what:

- the response: ``start`` (metadata: the thread and run ids), ``finish``
  (``stop``, or ``tool-calls`` when it waits for approvals; metadata: the
  tree's usage), then ``data: [DONE]``; a run that failed sends ``error``, one
  cancelled ``abort``;
- each model call of the agent itself: a step (``start-step``, ``finish-step``);
  its text ``text-start``/``-delta``/``-end``, its reasoning ``reasoning-*``,
  each tool call a dynamic tool (``tool-input-available``), its result
  ``tool-output-available`` (``tool-output-error`` when it failed,
  ``tool-output-denied`` when a human rejected it);
- a call that waits for a human: ``tool-approval-request`` (its approval id is
  the call's id), answered with ``addToolApprovalResponse``;
- todos and files: data parts ``data-todos`` (id ``todos``) and ``data-file``
  (id: the path; ``{path, change, content}``), replaced in place as they change;
- subagents: ``data-subagent`` (id: the actor path; ``{path, name,
  description, toolCallId, status}``, status ``running``, then ``finished``,
  ``failed``, ``cancelled`` or ``interrupted``), and a subagent's own text,
  reasoning and tool calls as parts whose ``providerMetadata.deepactors.path``
  (``callProviderMetadata`` on a tool part) is its actor path. A hidden
  subagent type sends only its ``data-subagent`` part;
- retries, fallbacks, budget stops, summaries, a tool's ``runtime.write``:
  transient ``data-notice`` parts (``onData``; not kept in the message).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...events import (
    BudgetExhausted,
    ContextSummarized,
    CustomEvent,
    Event,
    Interrupted,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    ModelFallback,
    ModelRetry,
    RunFinished,
    SkillSkipped,
    StateUpdated,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    SubagentSpawned,
    ToolCallFinished,
)
from ...langchain.views import event_to_json, usage_to_lc, values_to_lc
from ...messages import AssistantMessage, ThinkingBlock, ToolCall, Usage
from .._protocol_runs import Outcome, SubagentFilter

__all__ = ["HEADERS", "AiSdkTranslator", "chunk"]

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
"""What the AI SDK's UI message stream responses carry (the SDK's own header)."""

_NOTICES = (ModelRetry, ModelFallback, BudgetExhausted, ContextSummarized, SkillSkipped)
_DONE = b"data: [DONE]\n\n"


def chunk(value: Mapping[str, object]) -> bytes:
    """One UI message chunk as a server-sent event."""
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=repr)
    return f"data: {body}\n\n".encode()


@dataclass(slots=True)
class _Actor:
    base: str = ""
    text: bool = False
    text_sent: bool = False
    reasoning: bool = False
    reasoning_sent: bool = False


@dataclass(slots=True)
class AiSdkTranslator:
    """Renders one run's events as UI message chunks (see the module docstring).

    Args:
        thread_id: The chat's id (the thread).
        run_id: The server's run.
        root: The path of the run's top actor (the agent's name).
        subagents: Which subagents' own events are left out.
        decided: The calls whose approvals this run answers (resumed), and
            whether each was approved: their parts are the client's already.
    """

    thread_id: str
    run_id: str
    root: str
    subagents: SubagentFilter = field(default_factory=SubagentFilter)
    decided: Mapping[str, bool] = field(default_factory=dict)
    _actors: dict[str, _Actor] = field(default_factory=dict)
    _step: bool = False
    _calls: set[str] = field(default_factory=set)  # tool calls whose part went out
    _subagents: dict[str, dict[str, object]] = field(default_factory=dict)
    _first_state: bool = True
    _interrupts: list[Mapping[str, object]] = field(default_factory=list)
    _usage: Usage | None = None

    # -- the Translator protocol ---------------------------------------------------

    def opening(self) -> bytes:
        """``start``, with the thread and run in the message's metadata."""
        meta = {"deepactors": {"threadId": self.thread_id, "runId": self.run_id}}
        return chunk({"type": "start", "messageMetadata": meta})

    def feed(self, event: Event) -> bytes:
        """The chunks for one of the run's events."""
        out = self.chunks(event)
        return b"".join(chunk(c) for c in out) if out else b""

    def closing(self, outcome: Outcome) -> bytes:
        """Close the open parts; ``finish``, ``abort`` or ``error``; ``[DONE]``."""
        out: list[dict[str, object]] = []
        for path in list(self._actors):
            out += self._close_actor(path)
        cancelled = outcome.status in ("interrupted", "error", "timeout")
        for path, data in self._subagents.items():
            if data["status"] == "running":
                status = "cancelled" if cancelled else "detached"
                out.append(self._subagent_part(path, status))
        if self._step:
            out.append({"type": "finish-step"})
            self._step = False
        match outcome.status:
            case "interrupted":
                out.append({"type": "abort", "reason": "the run was cancelled"})
            case "error" | "timeout":
                error = outcome.error or {}
                text = str(error.get("message") or f"the run ended: {outcome.status}")
                out.append({"type": "error", "errorText": text})
            case _:
                reason = "tool-calls" if self._interrupts else "stop"
                finish: dict[str, object] = {"type": "finish", "finishReason": reason}
                if self._usage is not None:
                    usage = usage_to_lc(self._usage)
                    finish["messageMetadata"] = {"deepactors": {"usage": usage}}
                out.append(finish)
        return b"".join(chunk(c) for c in out) + _DONE

    # -- events --------------------------------------------------------------------

    def chunks(self, event: Event) -> list[dict[str, object]]:
        """The UI message chunks (dicts) for one of the run's events."""
        path = event.path
        if self.subagents.hides(path):
            return []
        match event:
            case ModelDelta():
                return self._delta(event)
            case ModelCallStarted():
                actor = self._actor(path)
                actor.base = f"{event.run_id}-{event.step}"
                actor.text_sent = actor.reasoning_sent = False
                if path != self.root:
                    return []
                step: list[dict[str, object]] = [{"type": "finish-step"}] if self._step else []
                self._step = True
                return [*step, {"type": "start-step"}]
            case ModelCallFinished():
                return self._answer(event)
            case ToolCallFinished():
                return self._result(event)
            case StateUpdated() if path == self.root:
                return self._state(event)
            case SubagentSpawned():
                self._subagents[event.child] = {
                    "path": event.child,
                    "name": event.subagent_type,
                    "description": event.description,
                    "toolCallId": event.call_id,
                    "status": "running",
                }
                return [self._subagent_part(event.child, "running")]
            case SubagentFinished():
                return self._subagent_end(event.child, "finished")
            case SubagentFailed():
                return self._subagent_end(event.child, "failed", error=event.error)
            case SubagentCancelled():
                return self._subagent_end(event.child, "cancelled")
            case SubagentInterrupted():
                return self._subagent_end(event.child, "interrupted")
            case Interrupted() if path == self.root:
                return self._approvals(event)
            case RunFinished() if path == self.root:
                self._usage = event.usage
                return []
            case CustomEvent():
                return [self._notice("custom", path, event.data)]
            case _ if isinstance(event, _NOTICES):
                data = event_to_json(event)
                return [self._notice(str(data.pop("event")), path, data)]
        return []

    def _actor(self, path: str) -> _Actor:
        actor = self._actors.get(path)
        if actor is None:
            actor = self._actors[path] = _Actor(base=f"{path}-0")
        return actor

    def _meta(self, value: dict[str, object], path: str) -> dict[str, object]:
        if path != self.root:
            value["providerMetadata"] = {"deepactors": {"path": path}}
        return value

    def _delta(self, event: ModelDelta) -> list[dict[str, object]]:
        if not event.text or event.kind == "tool_input":
            return []
        path = event.path
        actor = self._actor(path)
        out: list[dict[str, object]] = []
        if event.kind == "thinking":
            if not actor.reasoning:
                actor.reasoning = True
                out.append(self._meta({"type": "reasoning-start", "id": f"{actor.base}-r"}, path))
            out.append({"type": "reasoning-delta", "id": f"{actor.base}-r", "delta": event.text})
            actor.reasoning_sent = True
            return out
        if not actor.text:
            actor.text = True
            out.append(self._meta({"type": "text-start", "id": f"{actor.base}-t"}, path))
        out.append({"type": "text-delta", "id": f"{actor.base}-t", "delta": event.text})
        actor.text_sent = True
        return out

    def _close_actor(self, path: str) -> list[dict[str, object]]:
        actor = self._actors.get(path)
        out: list[dict[str, object]] = []
        if actor is None:
            return out
        if actor.reasoning:
            actor.reasoning = False
            out.append({"type": "reasoning-end", "id": f"{actor.base}-r"})
        if actor.text:
            actor.text = False
            out.append({"type": "text-end", "id": f"{actor.base}-t"})
        return out

    def _answer(self, event: ModelCallFinished) -> list[dict[str, object]]:
        path = event.path
        actor = self._actor(path)
        message: AssistantMessage = event.message
        out: list[dict[str, object]] = []
        thinking = _thinking(message)
        if thinking and not actor.reasoning_sent:
            rid = f"{actor.base}-r"
            if not actor.reasoning:
                out.append(self._meta({"type": "reasoning-start", "id": rid}, path))
                actor.reasoning = True
            out.append({"type": "reasoning-delta", "id": rid, "delta": thinking})
        text = message.text
        if text and not actor.text_sent:
            tid = f"{actor.base}-t"
            if not actor.text:
                out.append(self._meta({"type": "text-start", "id": tid}, path))
                actor.text = True
            out.append({"type": "text-delta", "id": tid, "delta": text})
        out += self._close_actor(path)
        for call in message.tool_calls:
            out.append(self._call(call, path))
        return out

    def _call(self, call: ToolCall, path: str) -> dict[str, object]:
        self._calls.add(call.id)
        available = {
            "type": "tool-input-available",
            "toolCallId": call.id,
            "toolName": call.name,
            "input": dict(call.args),
            "dynamic": True,
        }
        return self._meta(available, path)

    def _result(self, event: ToolCallFinished) -> list[dict[str, object]]:
        call_id = event.call.id
        out = []
        if call_id not in self._calls and call_id not in self.decided:
            out.append(self._call(event.call, event.path))  # (its part went out in no response)
        result = event.result
        if self.decided.get(call_id) is False:
            return [*out, {"type": "tool-output-denied", "toolCallId": call_id}]
        if result.status == "error":
            return [
                *out,
                {
                    "type": "tool-output-error",
                    "toolCallId": call_id,
                    "errorText": result.text,
                    "dynamic": True,
                },
            ]
        return [
            *out,
            {
                "type": "tool-output-available",
                "toolCallId": call_id,
                "output": result.text,
                "dynamic": True,
            },
        ]

    def _approvals(self, event: Interrupted) -> list[dict[str, object]]:
        self._interrupts = list(event.requests)
        out: list[dict[str, object]] = []
        for request in event.requests:
            call_id = str(request["id"])
            if call_id not in self._calls:  # a hidden subagent's call: its part first
                call = ToolCall(id=call_id, name=request["tool"], args=dict(request["args"]))
                out.append(self._call(call, str(request.get("path") or self.root)))
            out.append(
                {"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}
            )
        return out

    # -- state, subagents, notices -------------------------------------------------

    def _state(self, event: StateUpdated) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        if self._first_state:
            self._first_state = False
            todos = event.values.get("todos") or []
            if todos:
                out.append(self._todos(todos))
            return out
        update = event.update
        if "todos" in update:
            out.append(self._todos(update["todos"]))
        if "files" in update:
            files = values_to_lc({"files": update["files"]})["files"]
            for name, data in files.items():
                change = "deleted" if data is None else "written"
                value = {"path": name, "change": change}
                if data is not None:
                    value["content"] = data.get("content")
                out.append({"type": "data-file", "id": name, "data": value})
        return out

    def _todos(self, todos: object) -> dict[str, object]:
        value = values_to_lc({"todos": todos})["todos"]
        return {"type": "data-todos", "id": "todos", "data": {"todos": value}}

    def _subagent_end(
        self, child: str, status: str, *, error: str | None = None
    ) -> list[dict[str, object]]:
        if child not in self._subagents:
            return []
        out = self._close_actor(child)
        return [*out, self._subagent_part(child, status, error=error)]

    def _subagent_part(
        self, child: str, status: str, *, error: str | None = None
    ) -> dict[str, object]:
        data = self._subagents[child]
        data["status"] = status
        value = dict(data)
        if error is not None:
            value["error"] = error
        return {"type": "data-subagent", "id": child, "data": value}

    def _notice(self, name: str, path: str, data: object) -> dict[str, object]:
        value = {"event": name, "path": path, "data": data}
        return {"type": "data-notice", "data": value, "transient": True}


def _thinking(message: AssistantMessage) -> str:
    if isinstance(message.content, str):
        return ""
    return "".join(b.thinking for b in message.content if isinstance(b, ThinkingBlock))

"""A run's events as AG-UI events (protocol 1.0, as ``@ag-ui/core`` 1.0.0 defines them).

One :class:`AguiTranslator` per run. What maps to what:

- the run: ``RUN_STARTED`` first; ``RUN_FINISHED`` last (its outcome ``success``,
  ``interrupt`` with the pending approvals, or ``cancelled``; its ``usage``), or
  ``RUN_ERROR`` when it failed or passed its deadline;
- a model's answer: ``TEXT_MESSAGE_START``/``CONTENT``/``END`` as it streams
  (reasoning: the ``REASONING_*`` events), then one ``TOOL_CALL_START``/``ARGS``/
  ``END`` per call it made; a tool's result: ``TOOL_CALL_RESULT``;
- state: ``STATE_SNAPSHOT`` of ``todos`` and ``files`` (LangGraph's shapes, as
  ``/threads/{id}/state`` gives them) at the run's first state, then
  ``STATE_DELTA`` (JSON Patch) for each change of the thread's own todos and files;
- subagents: ``SUBAGENT_STARTED``/``FINISHED``/``ERROR``, and every event of a
  subagent carries ``subagentRunId``: its actor path (``main/task-2:researcher``),
  the invocation's id; a subagent stopped for a decision ends ``suspended``;
- retries, fallbacks, budgets, summaries and tools' own events: ``CUSTOM``
  named ``deepactors.<event>``.

A subagent type the client hides (``SubagentFilter``) keeps its lifecycle events;
its text, reasoning, tool calls and customs are left out, as are its own
subagents' (also their lifecycle). Whatever is still open when the run ends
(a cancelled run's messages, subagents) is closed first, so the stream is one
the client's verifier accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from ...langchain.views import event_to_json, values_to_lc
from ...messages import AssistantMessage, ThinkingBlock, Usage
from .._protocol_runs import Outcome, SubagentFilter

__all__ = ["PROTOCOL_VERSION", "AguiTranslator", "interrupt_of", "sse"]

PROTOCOL_VERSION = "1.0"
"""The AG-UI version these events follow."""

_NOTICES = (ModelRetry, ModelFallback, BudgetExhausted, ContextSummarized, SkillSkipped)


def sse(event: Mapping[str, Any]) -> bytes:
    """One AG-UI event as a server-sent event (``data:`` line, as HttpAgent reads it)."""
    body = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=repr)
    return f"data: {body}\n\n".encode()


def interrupt_of(request: Mapping[str, Any], root: str) -> dict[str, Any]:
    """A pending approval (an ``ActionRequest``'s dict) as an AG-UI ``Interrupt``.

    Its id is the tool call's; the answer (``payload`` of a resume entry) is a
    decision, as ``responseSchema`` says.
    """
    allowed = list(request.get("allowed_decisions") or ())
    tool = request["tool"]
    args = dict(request.get("args") or {})
    out: dict[str, Any] = {
        "id": request["id"],
        "reason": "tool_approval",
        "message": request.get("description") or f"approve {tool}({_short_args(args)})?",
        "toolCallId": request["id"],
        "responseSchema": _decision_schema(allowed),
        "metadata": {
            "deepactors": {"tool": tool, "args": args, "allowed_decisions": allowed},
        },
    }
    path = request.get("path")
    if isinstance(path, str) and path != root:
        out["subagentRunId"] = path
    return out


def _decision_schema(allowed: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "type": {"enum": list(allowed)},
            "args": {"type": "object", "description": "edit: the arguments to run it with"},
            "message": {"type": "string", "description": "reject, respond: what the model reads"},
        },
        "required": ["type"],
    }


def _short_args(args: Mapping[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(slots=True)
class _Actor:
    """What is open for one actor: its current answer's text and reasoning."""

    base: str = ""  # the id of the answer being streamed (its text message)
    text: bool = False  # a text message is open
    text_sent: bool = False  # this answer's text went out (streamed)
    reasoning: bool = False  # a reasoning message is open
    reasoning_sent: bool = False


@dataclass(slots=True)
class AguiTranslator:
    """Renders one run's events as AG-UI events (see the module docstring).

    Args:
        thread_id: The client's ``threadId``.
        run_id: The client's ``runId``.
        root: The path of the run's top actor (the agent's name).
        subagents: Which subagents' own events are left out.
    """

    thread_id: str
    run_id: str
    root: str
    subagents: SubagentFilter = field(default_factory=SubagentFilter)
    _actors: dict[str, _Actor] = field(default_factory=dict)
    _open_subagents: dict[str, None] = field(default_factory=dict)  # in start order
    _files: set[str] = field(default_factory=set)
    _snapshot_sent: bool = False
    _interrupts: list[dict[str, Any]] = field(default_factory=list)
    _usage: Usage | None = None

    # -- the Translator protocol ---------------------------------------------------

    def opening(self) -> bytes:
        """``RUN_STARTED``."""
        return sse(
            {
                "type": "RUN_STARTED",
                "threadId": self.thread_id,
                "runId": self.run_id,
                "protocolVersion": PROTOCOL_VERSION,
            }
        )

    def feed(self, event: Event) -> bytes:
        """The AG-UI events for one of the run's events."""
        out = self.events(event)
        return b"".join(sse(e) for e in out) if out else b""

    def closing(self, outcome: Outcome) -> bytes:
        """Close what is open, then ``RUN_FINISHED`` or ``RUN_ERROR``."""
        cancelled = outcome.status in ("interrupted", "error", "timeout")
        out = self._close_all(cancelled)
        match outcome.status:
            case "success" | "pending" | "running":
                finished: dict[str, Any] = {
                    "type": "RUN_FINISHED",
                    "threadId": self.thread_id,
                    "runId": self.run_id,
                }
                if self._interrupts:
                    finished["outcome"] = {"type": "interrupt", "interrupts": self._interrupts}
                else:
                    finished["outcome"] = {"type": "success"}
                usage = self._usage_entries()
                if usage:
                    finished["usage"] = usage
                out.append(finished)
            case "interrupted":
                out.append(
                    {
                        "type": "RUN_FINISHED",
                        "threadId": self.thread_id,
                        "runId": self.run_id,
                        "outcome": {"type": "cancelled"},
                    }
                )
            case "error" | "timeout":
                error = outcome.error or {}
                failed: dict[str, Any] = {
                    "type": "RUN_ERROR",
                    "message": str(error.get("message") or "the run failed"),
                    "code": str(error.get("error") or outcome.status),
                }
                usage = self._usage_entries()
                if usage:
                    failed["usage"] = usage
                out.append(failed)
        return b"".join(sse(e) for e in out)

    # -- events --------------------------------------------------------------------

    def events(self, event: Event) -> list[dict[str, Any]]:
        """The AG-UI events (dicts) for one of the run's events."""
        path = event.path
        if self.subagents.hides(path):
            # Its own events, and its subagents' (their lifecycle too: it comes
            # from it); its own lifecycle comes from its parent, and goes out.
            return []
        match event:
            case ModelDelta():
                return self._delta(event)
            case ModelCallStarted():
                actor = self._actor(path)
                actor.base = f"{event.run_id}-{event.step}"
                actor.text_sent = actor.reasoning_sent = False
                return []
            case ModelCallFinished():
                return self._answer(event)
            case ToolCallFinished():
                return [
                    self._tag(
                        {
                            "type": "TOOL_CALL_RESULT",
                            "messageId": event.result.id,
                            "toolCallId": event.call.id,
                            "content": event.result.text,
                            "role": "tool",
                        },
                        path,
                    )
                ]
            case StateUpdated() if path == self.root:
                return self._state(event)
            case SubagentSpawned():
                return self._spawned(event)
            case SubagentFinished():
                return self._end_subagent(event.child, {"outcome": {"type": "success"}})
            case SubagentInterrupted():
                own = [r["id"] for r in event.requests if r.get("path") == event.child]
                suspended: dict[str, Any] = {"type": "suspended"}
                if own:
                    suspended["interruptIds"] = own
                return self._end_subagent(event.child, {"outcome": suspended})
            case SubagentFailed():
                return self._fail_subagent(event.child, event.error, "failed")
            case SubagentCancelled():
                code = "timed_out" if event.timed_out else "cancelled"
                why = "passed its deadline" if event.timed_out else "was cancelled"
                return self._fail_subagent(event.child, f"the subagent {why}", code)
            case Interrupted() if path == self.root:
                self._interrupts = [interrupt_of(r, self.root) for r in event.requests]
                return []
            case RunFinished() if path == self.root:
                self._usage = event.usage
                return []
            case CustomEvent():
                return [self._tag(self._custom("custom", event.data), path)]
            case _ if isinstance(event, _NOTICES):
                return [self._tag(self._custom_of(event), path)]
        return []

    def _actor(self, path: str) -> _Actor:
        actor = self._actors.get(path)
        if actor is None:
            actor = self._actors[path] = _Actor(base=f"{path}-0")
        return actor

    def _tag(self, event: dict[str, Any], path: str) -> dict[str, Any]:
        if path != self.root:
            event["subagentRunId"] = path
        return event

    def _delta(self, event: ModelDelta) -> list[dict[str, Any]]:
        if not event.text or event.kind == "tool_input":
            return []
        path = event.path
        actor = self._actor(path)
        out: list[dict[str, Any]] = []
        if event.kind == "thinking":
            if actor.text:
                out += self._end_text(actor, path)
            if not actor.reasoning:
                out += self._start_reasoning(actor, path)
            rid = f"{actor.base}-reasoning"
            out.append(
                self._tag(
                    {"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": event.text},
                    path,
                )
            )
            actor.reasoning_sent = True
            return out
        if actor.reasoning:
            out += self._end_reasoning(actor, path)
        if not actor.text:
            out.append(
                self._tag(
                    {"type": "TEXT_MESSAGE_START", "messageId": actor.base, "role": "assistant"},
                    path,
                )
            )
            actor.text = True
        out.append(
            self._tag(
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": actor.base, "delta": event.text},
                path,
            )
        )
        actor.text_sent = True
        return out

    def _start_reasoning(self, actor: _Actor, path: str) -> list[dict[str, Any]]:
        rid = f"{actor.base}-reasoning"
        actor.reasoning = True
        return [
            self._tag({"type": "REASONING_START", "messageId": rid}, path),
            self._tag(
                {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"}, path
            ),
        ]

    def _end_reasoning(self, actor: _Actor, path: str) -> list[dict[str, Any]]:
        rid = f"{actor.base}-reasoning"
        actor.reasoning = False
        return [
            self._tag({"type": "REASONING_MESSAGE_END", "messageId": rid}, path),
            self._tag({"type": "REASONING_END", "messageId": rid}, path),
        ]

    def _end_text(self, actor: _Actor, path: str) -> list[dict[str, Any]]:
        actor.text = False
        return [self._tag({"type": "TEXT_MESSAGE_END", "messageId": actor.base}, path)]

    def _answer(self, event: ModelCallFinished) -> list[dict[str, Any]]:
        """The answer's parts that did not stream (all of it, for a model that
        does not), then its tool calls."""
        path = event.path
        actor = self._actor(path)
        message: AssistantMessage = event.message
        out: list[dict[str, Any]] = []
        thinking = _thinking(message)
        if thinking and not actor.reasoning_sent:
            if actor.text:
                out += self._end_text(actor, path)
            out += self._start_reasoning(actor, path)
            rid = f"{actor.base}-reasoning"
            out.append(
                self._tag(
                    {"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": thinking},
                    path,
                )
            )
        if actor.reasoning:
            out += self._end_reasoning(actor, path)
        text = message.text
        if text and not actor.text_sent:
            out.append(
                self._tag(
                    {"type": "TEXT_MESSAGE_START", "messageId": actor.base, "role": "assistant"},
                    path,
                )
            )
            out.append(
                self._tag(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": actor.base, "delta": text},
                    path,
                )
            )
            actor.text = True
        if actor.text:
            out += self._end_text(actor, path)
        for call in message.tool_calls:
            start = {
                "type": "TOOL_CALL_START",
                "toolCallId": call.id,
                "toolCallName": call.name,
                "parentMessageId": actor.base,
            }
            args = json.dumps(call.args, separators=(",", ":"), ensure_ascii=False, default=repr)
            out.append(self._tag(start, path))
            out.append(
                self._tag({"type": "TOOL_CALL_ARGS", "toolCallId": call.id, "delta": args}, path)
            )
            out.append(self._tag({"type": "TOOL_CALL_END", "toolCallId": call.id}, path))
        return out

    # -- state ---------------------------------------------------------------------

    def _state(self, event: StateUpdated) -> list[dict[str, Any]]:
        if not self._snapshot_sent:
            self._snapshot_sent = True
            values = event.values
            snapshot = values_to_lc(
                {"todos": values.get("todos", []), "files": values.get("files", {})}
            )
            self._files = set(snapshot["files"])
            return [{"type": "STATE_SNAPSHOT", "snapshot": snapshot}]
        update = event.update
        patch: list[dict[str, Any]] = []
        if "todos" in update:
            todos = values_to_lc({"todos": update["todos"]})["todos"]
            patch.append({"op": "replace", "path": "/todos", "value": todos})
        if "files" in update:
            files = values_to_lc({"files": update["files"]})["files"]
            for name, data in files.items():
                pointer = "/files/" + name.replace("~", "~0").replace("/", "~1")
                if data is None:
                    if name in self._files:
                        self._files.discard(name)
                        patch.append({"op": "remove", "path": pointer})
                    continue
                op = "replace" if name in self._files else "add"
                self._files.add(name)
                patch.append({"op": op, "path": pointer, "value": data})
        return [{"type": "STATE_DELTA", "delta": patch}] if patch else []

    # -- subagents -----------------------------------------------------------------

    def _spawned(self, event: SubagentSpawned) -> list[dict[str, Any]]:
        started: dict[str, Any] = {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": event.child,
            "name": event.subagent_type,
            "description": event.description,
        }
        if event.call_id is not None:
            started["parentToolCallId"] = event.call_id
        if event.path != self.root and event.path in self._open_subagents:
            started["parentSubagentRunId"] = event.path
        if event.background:
            started["metadata"] = {"deepactors": {"background": True}}
        self._open_subagents[event.child] = None
        return [started]

    def _end_subagent(self, child: str, fields: dict[str, Any]) -> list[dict[str, Any]]:
        if child not in self._open_subagents:
            return []
        out = self._close_under(child, cancelled=False)
        del self._open_subagents[child]
        out.append({"type": "SUBAGENT_FINISHED", "subagentRunId": child, **fields})
        return out

    def _fail_subagent(self, child: str, message: str, code: str) -> list[dict[str, Any]]:
        if child not in self._open_subagents:
            return []
        out = self._close_under(child, cancelled=True)
        del self._open_subagents[child]
        out.append(
            {"type": "SUBAGENT_ERROR", "subagentRunId": child, "message": message, "code": code}
        )
        return out

    def _close_under(self, path: str, *, cancelled: bool) -> list[dict[str, Any]]:
        """Close the open messages of the actor at ``path`` and of those under it,
        and end its subagents still open (the deepest first: they started last)."""
        out: list[dict[str, Any]] = []
        prefix = path + "/"
        for child in reversed([c for c in self._open_subagents if c.startswith(prefix)]):
            out += self._close_actor(child)
            del self._open_subagents[child]
            out.append(self._lost_subagent(child, cancelled))
        return out + self._close_actor(path)

    def _close_actor(self, path: str) -> list[dict[str, Any]]:
        actor = self._actors.get(path)
        out: list[dict[str, Any]] = []
        if actor is not None:
            if actor.reasoning:
                out += self._end_reasoning(actor, path)
            if actor.text:
                out += self._end_text(actor, path)
        return out

    def _lost_subagent(self, child: str, cancelled: bool) -> dict[str, Any]:
        if cancelled:
            return {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": child,
                "message": "the subagent was cancelled",
                "code": "cancelled",
            }
        # Still working when its parent ended (a background task goes on after
        # the run that started it): this stream says no more of it.
        return {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": child,
            "metadata": {"deepactors": {"detached": True}},
        }

    def _close_all(self, cancelled: bool) -> list[dict[str, Any]]:
        return self._close_under(self.root, cancelled=cancelled)

    # -- the rest ------------------------------------------------------------------

    def _custom(self, name: str, value: Any) -> dict[str, Any]:
        return {"type": "CUSTOM", "name": f"deepactors.{name}", "value": value}

    def _custom_of(self, event: Event) -> dict[str, Any]:
        data = event_to_json(event)
        return self._custom(str(data.pop("event")), data)

    def _usage_entries(self) -> list[dict[str, int]]:
        usage = self._usage
        if usage is None:
            return []
        total_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return [
            {
                "inputTokens": total_in,
                "outputTokens": usage.output_tokens,
                "totalTokens": total_in + usage.output_tokens,
                "cachedInputTokens": usage.cache_read_tokens,
                "cacheWriteInputTokens": usage.cache_write_tokens,
            }
        ]


def _thinking(message: AssistantMessage) -> str:
    if isinstance(message.content, str):
        return ""
    return "".join(b.thinking for b in message.content if isinstance(b, ThinkingBlock))

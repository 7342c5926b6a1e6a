"""A run's events as AG-UI events (protocol 1.0, as ``@ag-ui/core`` 1.0.0 defines them).

One :class:`AguiTranslator` per run. What maps to what:

- the run: ``RUN_STARTED`` first; ``RUN_FINISHED`` last (its outcome ``success``,
  ``interrupt`` with the pending approvals, as ``_interrupts`` writes them, or
  ``cancelled``; its ``usage``), or ``RUN_ERROR`` when it failed or passed its
  deadline;
- a model's answer: ``TEXT_MESSAGE_START``/``CONTENT``/``END`` as it streams
  (reasoning: the ``REASONING_*`` events), then one ``TOOL_CALL_START``/``ARGS``/
  ``END`` per call it made; a tool's result: ``TOOL_CALL_RESULT``;
- state: ``STATE_SNAPSHOT`` of ``todos`` and ``files`` (LangGraph's shapes, as
  ``/threads/{id}/state`` gives them) at the run's first state, then
  ``STATE_DELTA`` (JSON Patch) for each change of the thread's own todos and files,
  as ``_state`` keeps track of them;
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
from ...langchain.views import event_to_json
from ...messages import AssistantMessage, ThinkingBlock, Usage
from .._protocol_runs import Outcome, SubagentFilter
from ._interrupts import interrupt_of
from ._state import StatePatches

__all__ = ["PROTOCOL_VERSION", "AguiTranslator", "sse"]

PROTOCOL_VERSION = "1.0"
"""The AG-UI version these events follow."""

_NOTICES = (ModelRetry, ModelFallback, BudgetExhausted, ContextSummarized, SkillSkipped)


def sse(event: Mapping[str, object]) -> bytes:
    """One AG-UI event as a server-sent event (``data:`` line, as HttpAgent reads it)."""
    body = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=repr)
    return f"data: {body}\n\n".encode()


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
    _state: StatePatches = field(default_factory=StatePatches)
    _interrupts: list[dict[str, object]] = field(default_factory=list)
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
                finished: dict[str, object] = {
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
                failed: dict[str, object] = {
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

    def events(self, event: Event) -> list[dict[str, object]]:
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
                return self._state.events(event)
            case SubagentSpawned():
                return self._spawned(event)
            case SubagentFinished():
                return self._end_subagent(event.child, {"outcome": {"type": "success"}})
            case SubagentInterrupted():
                own = [r["id"] for r in event.requests if r.get("path") == event.child]
                suspended: dict[str, object] = {"type": "suspended"}
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

    def _tag(self, event: dict[str, object], path: str) -> dict[str, object]:
        if path != self.root:
            event["subagentRunId"] = path
        return event

    def _delta(self, event: ModelDelta) -> list[dict[str, object]]:
        if not event.text or event.kind == "tool_input":
            return []
        path = event.path
        actor = self._actor(path)
        out: list[dict[str, object]] = []
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

    def _start_reasoning(self, actor: _Actor, path: str) -> list[dict[str, object]]:
        rid = f"{actor.base}-reasoning"
        actor.reasoning = True
        return [
            self._tag({"type": "REASONING_START", "messageId": rid}, path),
            self._tag(
                {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"}, path
            ),
        ]

    def _end_reasoning(self, actor: _Actor, path: str) -> list[dict[str, object]]:
        rid = f"{actor.base}-reasoning"
        actor.reasoning = False
        return [
            self._tag({"type": "REASONING_MESSAGE_END", "messageId": rid}, path),
            self._tag({"type": "REASONING_END", "messageId": rid}, path),
        ]

    def _end_text(self, actor: _Actor, path: str) -> list[dict[str, object]]:
        actor.text = False
        return [self._tag({"type": "TEXT_MESSAGE_END", "messageId": actor.base}, path)]

    def _answer(self, event: ModelCallFinished) -> list[dict[str, object]]:
        """The answer's parts that did not stream (all of it, for a model that
        does not), then its tool calls."""
        path = event.path
        actor = self._actor(path)
        message: AssistantMessage = event.message
        out: list[dict[str, object]] = []
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
            start: dict[str, object] = {
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

    # -- subagents -----------------------------------------------------------------

    def _spawned(self, event: SubagentSpawned) -> list[dict[str, object]]:
        started: dict[str, object] = {
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

    def _end_subagent(self, child: str, fields: dict[str, object]) -> list[dict[str, object]]:
        if child not in self._open_subagents:
            return []
        out = self._close_under(child, cancelled=False)
        del self._open_subagents[child]
        out.append({"type": "SUBAGENT_FINISHED", "subagentRunId": child, **fields})
        return out

    def _fail_subagent(self, child: str, message: str, code: str) -> list[dict[str, object]]:
        if child not in self._open_subagents:
            return []
        out = self._close_under(child, cancelled=True)
        del self._open_subagents[child]
        out.append(
            {"type": "SUBAGENT_ERROR", "subagentRunId": child, "message": message, "code": code}
        )
        return out

    def _close_under(self, path: str, *, cancelled: bool) -> list[dict[str, object]]:
        """Close the open messages of the actor at ``path`` and of those under it,
        and end its subagents still open (the deepest first: they started last)."""
        out: list[dict[str, object]] = []
        prefix = path + "/"
        for child in reversed([c for c in self._open_subagents if c.startswith(prefix)]):
            out += self._close_actor(child)
            del self._open_subagents[child]
            out.append(self._lost_subagent(child, cancelled))
        return out + self._close_actor(path)

    def _close_actor(self, path: str) -> list[dict[str, object]]:
        actor = self._actors.get(path)
        out: list[dict[str, object]] = []
        if actor is not None:
            if actor.reasoning:
                out += self._end_reasoning(actor, path)
            if actor.text:
                out += self._end_text(actor, path)
        return out

    def _lost_subagent(self, child: str, cancelled: bool) -> dict[str, object]:
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

    def _close_all(self, cancelled: bool) -> list[dict[str, object]]:
        return self._close_under(self.root, cancelled=cancelled)

    # -- the rest ------------------------------------------------------------------

    def _custom(self, name: str, value: object) -> dict[str, object]:
        return {"type": "CUSTOM", "name": f"deepactors.{name}", "value": value}

    def _custom_of(self, event: Event) -> dict[str, object]:
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

"""The spans of one top-level run, made from its events (see :mod:`deepactors.tracing`).

Every actor of the tree emits its events through the run's one ``emit``, so
one consumer sees the whole tree in the order things happened, and each span
starts and ends at the moment its event is emitted. Nothing of the runtime
waits on it or knows about it: tracing is the events, read once more.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..events import (
    BudgetExhausted,
    ContextSummarized,
    Event,
    Interrupted,
    ModelCallFinished,
    ModelCallStarted,
    ModelFallback,
    ModelRetry,
    RunFinished,
    RunStarted,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    SubagentSpawned,
    ToolCallFinished,
    ToolCallStarted,
)
from ..messages import AssistantMessage, Usage

__all__ = ["TreeTracer"]

_SCOPE = "deepactors"
_MAX_TEXT = 8192  # of a content attribute: enough to read, not a copy of a whole file


class _Actor:
    """The open spans of one actor: its run, its model call, its tool calls."""

    __slots__ = ("children", "context", "model", "span", "tools")

    def __init__(self, span: Span) -> None:
        self.span = span
        # The context its model and tool spans start in: made once, not per span.
        self.context = trace.set_span_in_context(span)
        self.model: Span | None = None
        self.tools: dict[str, Span] = {}
        self.children: list[str] = []

    def end_open(self, why: str, *, waiting: bool = False) -> None:
        """End the model and tool spans still open (their actor is ending).

        ``waiting``: the run stopped for a human; a call it stopped at is not
        an error, it waits (its decision runs it in the resumed run).
        """
        if self.model is not None:
            _fail(self.model, why)
            self.model.end()
            self.model = None
        for span in self.tools.values():
            if waiting:
                span.set_attribute("deepactors.outcome", "interrupted")
            else:
                _fail(span, why)
            span.end()
        self.tools.clear()


class TreeTracer:
    """Turns one run's events into spans (an ``on_event`` consumer)."""

    __slots__ = ("_actors", "_capture", "_handlers", "_parent", "_thread_id", "_tracer")

    def __init__(self, provider: Any, *, capture_content: bool, thread_id: str | None) -> None:
        self._tracer: trace.Tracer = provider.get_tracer(_SCOPE, _version())
        self._capture = capture_content
        self._thread_id = thread_id
        # The context current where the run was ordered: a span of the caller's,
        # or the server's extracted ``traceparent``.
        self._parent = otel_context.get_current()
        self._actors: dict[str, _Actor] = {}
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            RunStarted: self._run_started,
            RunFinished: self._run_finished,
            SubagentSpawned: self._spawned,
            SubagentFinished: self._child_ended,
            SubagentFailed: self._child_ended,
            SubagentCancelled: self._child_ended,
            SubagentInterrupted: self._child_ended,
            ModelCallStarted: self._model_started,
            ModelCallFinished: self._model_finished,
            ModelRetry: self._model_note,
            ModelFallback: self._model_note,
            ToolCallStarted: self._tool_started,
            ToolCallFinished: self._tool_finished,
            ContextSummarized: self._actor_note,
            BudgetExhausted: self._actor_note,
            Interrupted: self._actor_note,
        }

    @property
    def trace_id(self) -> str | None:
        """The run's trace id (32 hex digits), once its span started."""
        for actor in self._actors.values():
            return f"{actor.span.get_span_context().trace_id:032x}"
        return None

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    # -- actors ----------------------------------------------------------------------

    def _agent_span(self, name: str, agent_id: str, parent: Any, run_id: str) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": agent_id,
            "deepactors.run_id": run_id,
        }
        if self._thread_id is not None:
            attributes["gen_ai.conversation.id"] = self._thread_id
            # LangSmith files a span's langsmith.metadata.* as its run's
            # metadata, and groups runs into threads by metadata thread_id.
            attributes["langsmith.metadata.thread_id"] = self._thread_id
        return self._tracer.start_span(
            f"invoke_agent {name}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )

    def _run_started(self, event: RunStarted) -> None:
        if event.path in self._actors:
            return
        span = self._agent_span(event.path, event.path, self._parent, event.run_id)
        self._actors[event.path] = _Actor(span)

    def _run_finished(self, event: RunFinished) -> None:
        # Deepest first, so every span ends before its parent does.
        waiting = event.outcome == "interrupted"
        for path in sorted(self._actors, key=len, reverse=True):
            actor = self._actors.pop(path)
            if path != event.path:
                why = f"the run {event.outcome}"
                actor.end_open(why, waiting=waiting)
                _fail(actor.span, why)
                actor.span.end()
                continue
            actor.end_open(f"the run {event.outcome}", waiting=waiting)
            if event.usage is not None:
                _set_usage(actor.span, event.usage)
            if event.outcome == "interrupted":
                actor.span.set_attribute("deepactors.outcome", "interrupted")
            elif event.outcome != "completed":
                actor.span.set_attribute("deepactors.outcome", event.outcome)
                _fail(actor.span, event.error or event.outcome, error_type=event.outcome)
            actor.span.end()

    def _spawned(self, event: SubagentSpawned) -> None:
        parent = self._actors.get(event.path)
        if parent is None or event.child in self._actors:
            return
        under = parent.tools.get(event.call_id) if event.call_id else None
        context = trace.set_span_in_context(under) if under is not None else parent.context
        span = self._agent_span(event.subagent_type, event.child, context, event.run_id)
        if self._capture:
            span.set_attribute("gen_ai.input.messages", _user_text(event.description))
        self._actors[event.child] = _Actor(span)
        parent.children.append(event.child)

    def _child_ended(
        self,
        event: SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted,
    ) -> None:
        ended = self._actors.pop(event.child, None)
        if ended is None:
            return
        # Its own children still open first (a cancelled subtree says nothing more).
        self._end_below(ended)
        actor, span = ended, ended.span
        match event:
            case SubagentFinished(usage=usage):
                actor.end_open("the subagent finished")
                if usage is not None:
                    _set_usage(span, usage)
            case SubagentFailed(error=error):
                actor.end_open("the subagent failed")
                _fail(span, error, error_type="failed")
            case SubagentCancelled(timed_out=timed_out):
                why = "timed out" if timed_out else "cancelled"
                actor.end_open(f"the subagent was {why}")
                _fail(span, f"the subagent was {why}", error_type=why.replace(" ", "_"))
            case SubagentInterrupted(requests=requests):
                actor.end_open("the subagent was interrupted", waiting=True)
                span.add_event("interrupt", {"deepactors.requests": len(requests)})
                span.set_attribute("deepactors.outcome", "interrupted")
        span.end()

    def _end_below(self, actor: _Actor) -> None:
        for path in actor.children:
            below = self._actors.pop(path, None)
            if below is not None:
                self._end_below(below)
                below.end_open("its parent ended")
                _fail(below.span, "its parent ended")
                below.span.end()
        actor.children.clear()

    def _actor_note(self, event: ContextSummarized | BudgetExhausted | Interrupted) -> None:
        actor = self._actors.get(event.path)
        if actor is None:
            return
        match event:
            case ContextSummarized():
                actor.span.add_event(
                    "summarize",
                    {
                        "deepactors.reason": event.reason,
                        "deepactors.messages_dropped": event.messages_dropped,
                        "deepactors.tokens_before": event.tokens_before,
                        "deepactors.tokens_after": event.tokens_after,
                    },
                )
            case BudgetExhausted():
                actor.span.add_event(
                    "budget_exhausted",
                    {
                        "deepactors.resource": event.resource,
                        "deepactors.limit": float(event.limit),
                        "deepactors.spent": float(event.spent),
                    },
                )
            case Interrupted():
                actor.span.add_event("interrupt", {"deepactors.requests": len(event.requests)})

    # -- model calls -----------------------------------------------------------------

    def _model_started(self, event: ModelCallStarted) -> None:
        actor = self._actors.get(event.path)
        if actor is None:
            return
        model = event.model or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.agent.id": event.path,
        }
        if event.provider:
            attributes["gen_ai.provider.name"] = event.provider
        actor.model = self._tracer.start_span(
            f"chat {model}",
            context=actor.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )

    def _model_note(self, event: ModelRetry | ModelFallback) -> None:
        actor = self._actors.get(event.path)
        span = None if actor is None else actor.model
        if span is None:
            return
        if isinstance(event, ModelRetry):
            span.add_event(
                "retry",
                {
                    "deepactors.attempt": event.attempt,
                    "deepactors.delay": event.delay,
                    "error.type": event.error.split(":", 1)[0],
                    "deepactors.error": event.error[:_MAX_TEXT],
                },
            )
        else:
            span.add_event(
                "fallback",
                {
                    "deepactors.failed_model": event.failed,
                    "deepactors.next_model": event.next,
                    "deepactors.error": event.error[:_MAX_TEXT],
                },
            )

    def _model_finished(self, event: ModelCallFinished) -> None:
        actor = self._actors.get(event.path)
        span = None if actor is None else actor.model
        if actor is None or span is None:
            return
        actor.model = None
        message = event.message
        if message.model:
            span.set_attribute("gen_ai.response.model", message.model)
        if message.stop_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [message.stop_reason])
        if message.usage is not None:
            _set_usage(span, message.usage)
        if self._capture:
            span.set_attribute("gen_ai.output.messages", _assistant_parts(message))
        span.end()

    # -- tool calls ------------------------------------------------------------------

    def _tool_started(self, event: ToolCallStarted) -> None:
        actor = self._actors.get(event.path)
        if actor is None:
            return
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = _json(call.args)
        actor.tools[call.id] = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=actor.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _tool_finished(self, event: ToolCallFinished) -> None:
        actor = self._actors.get(event.path)
        span = None if actor is None else actor.tools.pop(event.call.id, None)
        if span is None:
            return
        result = event.result
        if result.status == "error":
            _fail(span, result.text[:_MAX_TEXT], error_type="tool_error")
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", result.text[:_MAX_TEXT])
        span.end()


def _version() -> str | None:
    try:
        return importlib.metadata.version("deepactors")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return None


def _fail(span: Span, description: str, *, error_type: str = "cancelled") -> None:
    span.set_status(Status(StatusCode.ERROR, description[:_MAX_TEXT]))
    span.set_attribute("error.type", error_type)


def _set_usage(span: Span, usage: Usage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cache_read_tokens:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    if usage.cache_write_tokens:
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)
    if usage.cost_usd is not None:
        span.set_attribute("deepactors.cost_usd", usage.cost_usd)
    if usage.requests != 1:
        span.set_attribute("deepactors.model_calls", usage.requests)


def _json(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular value: said, not raised from a tracer
        text = repr(value)
    return text[:_MAX_TEXT]


def _user_text(text: str) -> str:
    parts = [{"type": "text", "content": text[:_MAX_TEXT]}]
    return json.dumps([{"role": "user", "parts": parts}], ensure_ascii=False)


def _assistant_parts(message: AssistantMessage) -> str:
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text[:_MAX_TEXT]})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args}
        )
    entry: dict[str, Any] = {"role": "assistant", "parts": parts}
    if message.stop_reason:
        entry["finish_reason"] = message.stop_reason
    return _json([entry])

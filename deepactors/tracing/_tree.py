"""The spans of one top-level run, made from its events (see :mod:`deepactors.tracing`).

Every actor of the tree emits its events through the run's one ``emit``, so
one consumer sees the whole tree in the order things happened, and each span
starts and ends at the moment its event is emitted. Nothing of the runtime
waits on it or knows about it: tracing is the events, read once more.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import time
from collections.abc import Callable
from typing import Any, ClassVar

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


class _ModelCall:
    """A model call in flight: its span is made when it ends.

    The span's attributes are all known only then (the response model, finish
    reasons, tokens, cost): made at the end with its start time, a span is one
    call into the SDK with every attribute, instead of a start and a
    ``set_attribute`` per figure. Nothing runs under it meanwhile (it is
    never the current span), so nothing needs it before.
    """

    __slots__ = ("attributes", "events", "name", "start")

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        self.name = name
        self.attributes = attributes
        self.start = time.time_ns()
        self.events: list[tuple[str, dict[str, Any], int]] | None = None  # retries, fallbacks


class _Tool:
    """An open tool call: its span, and the context made current for the call."""

    __slots__ = ("context", "span", "token")

    def __init__(self, span: Span, context: otel_context.Context, token: object) -> None:
        self.span = span
        self.context = context
        self.token = token


class _Actor:
    """The open spans of one actor: its run, its model call, its tool calls."""

    __slots__ = ("children", "context", "model", "span", "tools")

    def __init__(self, span: Span) -> None:
        self.span = span
        # The context its model and tool spans start in: made once, not per span.
        self.context = trace.set_span_in_context(span)
        self.model: _ModelCall | None = None
        self.tools: dict[str, _Tool] = {}
        self.children: list[str] = []

    def end_open(self, tracer: trace.Tracer, why: str, *, waiting: bool = False) -> None:
        """End the model and tool spans still open (their actor is ending).

        ``waiting``: the run stopped for a human; a call it stopped at is not
        an error, it waits (its decision runs it in the resumed run).
        """
        if self.model is not None:
            span = _model_span(tracer, self.model, self.context)
            _fail(span, why)
            span.end()
            self.model = None
        for tool in self.tools.values():
            if waiting:
                tool.span.set_attribute("deepactors.outcome", "interrupted")
            else:
                _fail(tool.span, why)
            tool.span.end()
        self.tools.clear()


class TreeTracer:
    """Turns one run's events into spans (an ``on_event`` consumer).

    Args:
        provider: The OpenTelemetry tracer provider.
        capture_content: Record message content on spans.
        thread_id: The run's thread, if any.
        path: The run's top-level actor; with ``run_id``, its span starts now
            (where the run is ordered), so the run's trace is known before it
            starts (:func:`deepactors.tracing.run_traces`). Else at its
            ``RunStarted``.
        run_id: The run's id.
    """

    # It reads a run's structure only: no token deltas or state snapshots are
    # made for it (see deepactors.events.wants_detail).
    structural_only: ClassVar[bool] = True

    __slots__ = ("_actors", "_capture", "_handlers", "_parent", "_thread_id", "_tracer")

    def __init__(
        self,
        provider: Any,
        *,
        capture_content: bool,
        thread_id: str | None,
        path: str | None = None,
        run_id: str | None = None,
    ) -> None:
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
        if path is not None and run_id is not None:
            span = self._agent_span(path, path, self._parent, run_id, root=True)
            self._actors[path] = _Actor(span)

    @property
    def root(self) -> Span | None:
        """The span of the run's top-level actor, once it started."""
        for actor in self._actors.values():
            return actor.span
        return None

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    # -- actors ----------------------------------------------------------------------

    def _agent_span(
        self, name: str, agent_id: str, parent: Any, run_id: str, *, root: bool
    ) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": agent_id,
        }
        thread_id = self._thread_id
        if thread_id is not None:
            attributes["gen_ai.conversation.id"] = thread_id
        if root:
            # What is the same for the whole tree is said once, on its root
            # (every attribute is a cost per span, and a subagent has 7).
            attributes["deepactors.run_id"] = run_id
            if thread_id is not None:
                # LangSmith files a span's langsmith.metadata.* as its run's
                # metadata, and groups root runs into threads by metadata thread_id.
                attributes["langsmith.metadata.thread_id"] = thread_id
        return self._tracer.start_span(
            f"invoke_agent {name}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )

    def _run_started(self, event: RunStarted) -> None:
        if event.path in self._actors:
            return
        span = self._agent_span(event.path, event.path, self._parent, event.run_id, root=True)
        self._actors[event.path] = _Actor(span)

    def _run_finished(self, event: RunFinished) -> None:
        # Deepest first, so every span ends before its parent does.
        waiting = event.outcome == "interrupted"
        tracer = self._tracer
        for path in sorted(self._actors, key=len, reverse=True):
            actor = self._actors.pop(path)
            why = f"the run {event.outcome}"
            actor.end_open(tracer, why, waiting=waiting)
            if path != event.path:
                _fail(actor.span, why)
                actor.span.end()
                continue
            ending = {} if event.usage is None else _usage(event.usage)
            if event.outcome != "completed":
                ending["deepactors.outcome"] = event.outcome
            if ending:
                actor.span.set_attributes(ending)
            if not waiting and event.outcome != "completed":
                _fail(actor.span, event.error or event.outcome, error_type=event.outcome)
            actor.span.end()

    def _spawned(self, event: SubagentSpawned) -> None:
        parent = self._actors.get(event.path)
        if parent is None or event.child in self._actors:
            return
        under = parent.tools.get(event.call_id) if event.call_id else None
        context = under.context if under is not None else parent.context
        span = self._agent_span(event.subagent_type, event.child, context, event.run_id, root=False)
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
        actor, span, tracer = ended, ended.span, self._tracer
        match event:
            case SubagentFinished(usage=usage):
                actor.end_open(tracer, "the subagent finished")
                if usage is not None:
                    span.set_attributes(_usage(usage))
            case SubagentFailed(error=error):
                actor.end_open(tracer, "the subagent failed")
                _fail(span, error, error_type="failed")
            case SubagentCancelled(timed_out=timed_out):
                why = "timed out" if timed_out else "cancelled"
                actor.end_open(tracer, f"the subagent was {why}")
                _fail(span, f"the subagent was {why}", error_type=why.replace(" ", "_"))
            case SubagentInterrupted(requests=requests):
                actor.end_open(tracer, "the subagent was interrupted", waiting=True)
                span.add_event("interrupt", {"deepactors.requests": len(requests)})
                span.set_attribute("deepactors.outcome", "interrupted")
        span.end()

    def _end_below(self, actor: _Actor) -> None:
        for path in actor.children:
            below = self._actors.pop(path, None)
            if below is not None:
                self._end_below(below)
                below.end_open(self._tracer, "its parent ended")
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
        }
        if event.provider:
            attributes["gen_ai.provider.name"] = event.provider
        actor.model = _ModelCall(f"chat {model}", attributes)

    def _model_note(self, event: ModelRetry | ModelFallback) -> None:
        actor = self._actors.get(event.path)
        call = None if actor is None else actor.model
        if call is None:
            return
        if call.events is None:
            call.events = []
        if isinstance(event, ModelRetry):
            call.events.append(
                (
                    "retry",
                    {
                        "deepactors.attempt": event.attempt,
                        "deepactors.delay": event.delay,
                        "error.type": event.error.split(":", 1)[0],
                        "deepactors.error": event.error[:_MAX_TEXT],
                    },
                    time.time_ns(),
                )
            )
        else:
            call.events.append(
                (
                    "fallback",
                    {
                        "deepactors.failed_model": event.failed,
                        "deepactors.next_model": event.next,
                        "deepactors.error": event.error[:_MAX_TEXT],
                    },
                    time.time_ns(),
                )
            )

    def _model_finished(self, event: ModelCallFinished) -> None:
        actor = self._actors.get(event.path)
        call = None if actor is None else actor.model
        if actor is None or call is None:
            return
        actor.model = None
        message = event.message
        attributes = call.attributes
        if message.model:
            attributes["gen_ai.response.model"] = message.model
        if message.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = (message.stop_reason,)
        if message.usage is not None:
            attributes.update(_usage(message.usage))
        if self._capture:
            attributes["gen_ai.output.messages"] = _assistant_parts(message)
        _model_span(self._tracer, call, actor.context).end()

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
        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=actor.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        # The event is emitted in the task that runs the call, just before it
        # runs: made current there, the span is the parent of whatever the tool
        # does (an HTTP request sends it as ``traceparent``, a span of the
        # tool's own nests under it). ToolCallFinished, in the same task, undoes
        # it; a call that ends otherwise is undone by run_tools.
        context = trace.set_span_in_context(span)
        actor.tools[call.id] = _Tool(span, context, otel_context.attach(context))

    def _tool_finished(self, event: ToolCallFinished) -> None:
        actor = self._actors.get(event.path)
        tool = None if actor is None else actor.tools.pop(event.call.id, None)
        if tool is None:
            return
        if otel_context.get_current() is tool.context:
            otel_context.detach(tool.token)  # type: ignore[arg-type]
        span = tool.span
        result = event.result
        if result.status == "error":
            _fail(span, result.text[:_MAX_TEXT], error_type="tool_error")
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", result.text[:_MAX_TEXT])
        span.end()


def _model_span(tracer: trace.Tracer, call: _ModelCall, parent: Any) -> Span:
    span = tracer.start_span(
        call.name,
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=call.attributes,
        start_time=call.start,
    )
    if call.events is not None:
        for name, attributes, at in call.events:
            span.add_event(name, attributes, timestamp=at)
    return span


@functools.cache
def _version() -> str | None:
    # Read from the installed distribution's files: once, not per run.
    try:
        return importlib.metadata.version("deepactors")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return None


def _fail(span: Span, description: str, *, error_type: str = "cancelled") -> None:
    span.set_status(Status(StatusCode.ERROR, description[:_MAX_TEXT]))
    span.set_attribute("error.type", error_type)


def _usage(usage: Usage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.cost_usd is not None:
        attributes["deepactors.cost_usd"] = usage.cost_usd
    if usage.requests != 1:
        attributes["deepactors.model_calls"] = usage.requests
    return attributes


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

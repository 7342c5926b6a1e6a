"""The spans of one top-level run, made from its events (see :mod:`deepactors.tracing`).

Every actor of the tree emits its events through the run's one ``emit``, so
one consumer sees the whole tree in the order things happened, and each span
starts and ends at the moment its event is emitted. Nothing of the runtime
waits on it or knows about it: tracing is the events, read once more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import Token
from typing import Any, ClassVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

from ..events import (
    BudgetExhausted,
    ContextSummarized,
    CustomEvent,
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
from ..messages import AssistantMessage
from ._attrs import (
    MAX_TEXT,
    agent_attributes,
    budget_event,
    chat_attributes,
    fail,
    fallback_event,
    package_version,
    response_attributes,
    retry_event,
    summary_event,
    tool_attributes,
    usage_attributes,
    user_text,
)

__all__ = ["TreeTracer"]

_SCOPE = "deepactors"


class _ModelCall:
    """A model call in flight: its span is made when it ends.

    The span's attributes are all known only then (the response model, finish
    reasons, tokens, cost): made at the end with its start time, a span is one
    call into the SDK with every attribute, instead of a start and a
    ``set_attribute`` per figure. Nothing runs under it meanwhile (it is
    never the current span), so nothing needs it before: what the call's
    start says is kept as it came (its name and attributes are made once,
    at the end, with the answer's).
    """

    __slots__ = ("events", "model", "provider", "start")

    def __init__(self, model: str, provider: str | None) -> None:
        self.model = model
        self.provider = provider
        self.start = time.time_ns()
        # Retries and fallbacks, as span events.
        self.events: list[tuple[str, dict[str, AttributeValue], int]] | None = None


class _Tool:
    """An open tool call: its span, and the context made current for the call."""

    __slots__ = ("context", "span", "token")

    def __init__(
        self, span: Span, context: otel_context.Context, token: Token[otel_context.Context]
    ) -> None:
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
            span = _model_span(tracer, self.model, self.context, None, False)
            fail(span, why)
            span.end()
            self.model = None
        for tool in self.tools.values():
            if waiting:
                tool.span.set_attribute("deepactors.outcome", "interrupted")
            else:
                fail(tool.span, why)
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

    __slots__ = (
        "_actors",
        "_background",
        "_capture",
        "_handlers",
        "_parent",
        "_remote",
        "_thread_id",
        "_tracer",
    )

    def __init__(
        self,
        provider: trace.TracerProvider,
        *,
        capture_content: bool,
        thread_id: str | None,
        path: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self._tracer: trace.Tracer = provider.get_tracer(_SCOPE, package_version())
        self._capture = capture_content
        self._thread_id = thread_id
        # The context current where the run was ordered: a span of the caller's,
        # or the server's extracted ``traceparent``.
        self._parent = otel_context.get_current()
        self._actors: dict[str, _Actor] = {}
        # Background children: their spans outlive the run's (see _run_finished).
        self._background: set[str] = set()
        # Children running on another server, by path: that server traces their
        # calls under the traceparent they were sent, so the calls their runs
        # relay here make no second span.
        self._remote: set[str] = set()
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            CustomEvent: self._custom,
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
        self,
        name: str,
        agent_id: str,
        parent: otel_context.Context | None,
        run_id: str,
        *,
        root: bool,
    ) -> Span:
        attributes = agent_attributes(
            name, agent_id, thread_id=self._thread_id, run_id=run_id, root=root
        )
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
            if self._background and self._outlives(path):
                # A background task working on after the run: its events keep
                # coming here, and its own end ends its span.
                continue
            actor = self._actors.pop(path)
            why = f"the run {event.outcome}"
            actor.end_open(tracer, why, waiting=waiting)
            if path != event.path:
                fail(actor.span, why)
                actor.span.end()
                continue
            ending = {} if event.usage is None else usage_attributes(event.usage)
            if event.outcome != "completed":
                ending["deepactors.outcome"] = event.outcome
            if ending:
                actor.span.set_attributes(ending)
            if not waiting and event.outcome != "completed":
                fail(actor.span, event.error or event.outcome, error_type=event.outcome)
            actor.span.end()

    def _outlives(self, path: str) -> bool:
        """Whether ``path`` is a background child or under one (its span outlives the run)."""
        return _under(path, self._background, itself=True)

    def _custom(self, event: CustomEvent) -> None:
        data = event.data
        run = data.get("remote_run") if isinstance(data, dict) else None
        actor = self._actors.get(event.path)
        if actor is None or not isinstance(run, dict):
            return
        self._remote.add(event.path)
        actor.span.set_attributes(
            {
                f"deepactors.remote.{key}": str(run[key])
                for key in ("url", "thread_id", "run_id")
                if key in run
            }
        )

    def _relayed(self, path: str) -> bool:
        """Whether ``path`` is under a remote child (its server traces it)."""
        return _under(path, self._remote, itself=False)

    def _spawned(self, event: SubagentSpawned) -> None:
        parent = self._actors.get(event.path)
        if parent is None or event.child in self._actors:
            return
        if self._remote and self._relayed(event.child):
            return
        if event.background:
            self._background.add(event.child)
        under = parent.tools.get(event.call_id) if event.call_id else None
        context = under.context if under is not None else parent.context
        span = self._agent_span(event.subagent_type, event.child, context, event.run_id, root=False)
        if self._capture:
            span.set_attribute("gen_ai.input.messages", user_text(event.description))
        self._actors[event.child] = _Actor(span)
        parent.children.append(event.child)

    def _child_ended(
        self,
        event: SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted,
    ) -> None:
        ended = self._actors.pop(event.child, None)
        self._background.discard(event.child)
        self._remote.discard(event.child)
        if ended is None:
            return
        # Its own children still open first (a cancelled subtree says nothing more).
        self._end_below(ended)
        actor, span, tracer = ended, ended.span, self._tracer
        match event:
            case SubagentFinished(usage=usage):
                actor.end_open(tracer, "the subagent finished")
                if usage is not None:
                    span.set_attributes(usage_attributes(usage))
            case SubagentFailed(error=error):
                actor.end_open(tracer, "the subagent failed")
                fail(span, error, error_type="failed")
            case SubagentCancelled(timed_out=timed_out):
                why = "timed out" if timed_out else "cancelled"
                actor.end_open(tracer, f"the subagent was {why}")
                fail(span, f"the subagent was {why}", error_type=why.replace(" ", "_"))
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
                fail(below.span, "its parent ended")
                below.span.end()
        actor.children.clear()

    def _actor_note(self, event: ContextSummarized | BudgetExhausted | Interrupted) -> None:
        actor = self._actors.get(event.path)
        if actor is None:
            return
        match event:
            case ContextSummarized():
                actor.span.add_event("summarize", summary_event(event))
            case BudgetExhausted():
                actor.span.add_event("budget_exhausted", budget_event(event))
            case Interrupted():
                actor.span.add_event("interrupt", {"deepactors.requests": len(event.requests)})

    # -- model calls -----------------------------------------------------------------

    def _model_started(self, event: ModelCallStarted) -> None:
        actor = self._actors.get(event.path)
        if actor is None or (self._remote and event.path in self._remote):
            return
        actor.model = _ModelCall(event.model or "unknown", event.provider)

    def _model_note(self, event: ModelRetry | ModelFallback) -> None:
        actor = self._actors.get(event.path)
        call = None if actor is None else actor.model
        if call is None:
            return
        if call.events is None:
            call.events = []
        name, attributes = (
            retry_event(event) if isinstance(event, ModelRetry) else fallback_event(event)
        )
        call.events.append((name, attributes, time.time_ns()))

    def _model_finished(self, event: ModelCallFinished) -> None:
        actor = self._actors.get(event.path)
        call = None if actor is None else actor.model
        if actor is None or call is None:
            return
        actor.model = None
        _model_span(self._tracer, call, actor.context, event.message, self._capture).end()

    # -- tool calls ------------------------------------------------------------------

    def _tool_started(self, event: ToolCallStarted) -> None:
        actor = self._actors.get(event.path)
        if actor is None or (self._remote and event.path in self._remote):
            return
        call = event.call
        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=actor.context,
            kind=SpanKind.INTERNAL,
            attributes=tool_attributes(call, capture=self._capture),
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
            otel_context.detach(tool.token)
        span = tool.span
        result = event.result
        if result.status == "error":
            fail(span, result.text[:MAX_TEXT], error_type="tool_error")
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", result.text[:MAX_TEXT])
        span.end()


def _under(path: str, roots: set[str], *, itself: bool) -> bool:
    # Its ancestors are looked up, not every root scanned: a tree is a few
    # levels deep, its background or remote children may be thousands.
    if itself and path in roots:
        return True
    cut = path.rfind("/")
    while cut > 0:
        path = path[:cut]
        if path in roots:
            return True
        cut = path.rfind("/")
    return False


def _model_span(
    tracer: trace.Tracer,
    call: _ModelCall,
    parent: otel_context.Context | None,
    answer: AssistantMessage | None,
    capture: bool,
) -> Span:
    """A model call's span, made when it ends (``answer``: what came back, if it did)."""
    attributes = chat_attributes(call.model, call.provider)
    if answer is not None:
        response_attributes(attributes, answer, capture=capture)
    span = tracer.start_span(
        f"chat {call.model}",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=call.start,
    )
    if call.events is not None:
        for name, attributes, at in call.events:
            span.add_event(name, attributes, timestamp=at)
    return span

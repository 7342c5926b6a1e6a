"""OpenTelemetry traces of runs, in the GenAI semantic conventions.

A run is traced when an OpenTelemetry tracer provider is configured: the
global one (``opentelemetry.trace.set_tracer_provider``, as the SDK's and most
vendors' set-up does), or one given to ``open_runtime(tracing=Tracing(...))``.
Without one, nothing of this runs: no span is made, ``opentelemetry`` is not
even imported, and the run's events go nowhere they did not go before.

The trace follows the actor tree: one ``invoke_agent {name}`` span per actor
run, each subagent's under the ``execute_tool task`` span of the call that
started it; one ``chat {model}`` span per model call (tokens, cached tokens,
finish reasons, the response model and the call's cost) and one
``execute_tool {name}`` span per tool call. Retries, fallbacks, summaries,
budget refusals and interrupts are events on the span they happened in; a run
that failed, timed out or was cancelled ends with an error status saying so.
The run's parent is the OpenTelemetry context current where it was started, so
a run started inside a span of yours, or by the server for a request carrying
``traceparent``, joins that trace.

While a tool runs, its ``execute_tool`` span is the current OpenTelemetry span
of the task running it: a span the tool starts nests under it, and an HTTP
request it makes can carry the trace on (:func:`outgoing_headers`; MCP servers
over HTTP are sent it on every request).

Message content (tool arguments and results, answers, subagent briefs) is left
out unless asked for, as the conventions say: ``Tracing(capture_content=True)``
or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Needs ``deepactors[otel]`` (the OpenTelemetry API; bring the SDK and an exporter).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, final

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ..events import Event

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "RunTrace",
    "Tracing",
    "attach_traceparent",
    "detach_traceparent",
    "kept_context",
    "outgoing_headers",
    "provider_of",
    "run_traces",
    "tree_tracer",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable the GenAI conventions name for recording content."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Tracing:
    """How a runtime traces its runs (``open_runtime(tracing=...)``).

    Attributes:
        tracer_provider: The OpenTelemetry ``TracerProvider`` to trace with;
            None: the global one, and no tracing while none is set.
        meter_provider: The ``MeterProvider`` to record metrics with; None:
            the global one, and no metrics while none is set.
        capture_content: Record message content on spans; None: as
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says (off
            when unset).
    """

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    capture_content: bool | None = None


def provider_of(model: object) -> str | None:
    """The ``gen_ai.provider.name`` of a model object: its ``provider`` if it says,
    else told by the package its class comes from (``anthropic``, ``openai``)."""
    said = getattr(model, "provider", None)
    if isinstance(said, str):
        return said
    cls: Any = type(model)  # mypy holds a class unhashable: it is the cache's key
    return _provider_of_class(cls)


@functools.cache
def _provider_of_class(cls: type) -> str | None:
    # Once per model class, not per model call (a streamed or traced run asks at each).
    module = cls.__module__
    for known in ("anthropic", "openai", "langchain"):
        if known in module:
            return known
    return None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunTrace:
    """The trace a run is in, and its top-level span (see :func:`run_traces`).

    Attributes:
        trace_id: The trace id, 32 lowercase hex digits (what trace viewers
            take in a link).
        span_id: The run's top-level span, 16 hex digits.
        traceparent: The W3C ``traceparent`` of that span.
    """

    trace_id: str
    span_id: str
    traceparent: str


_STARTED: ContextVar[list[RunTrace] | None] = ContextVar("deepactors_run_traces", default=None)


@contextmanager
def run_traces() -> Iterator[list[RunTrace]]:
    """Learn the traces of the runs ordered inside the block, in the caller's task.

    A traced run's top-level span starts where the run is ordered
    (``runtime.start``, ``thread.start``), so its trace is known as soon as
    that returns: the server puts it in the run's metadata that way. Runs not
    traced add nothing (the list stays empty when tracing is off).

    Yields:
        The list the block's runs' traces are appended to, in order.
    """
    started: list[RunTrace] = []
    token = _STARTED.set(started)
    try:
        yield started
    finally:
        _STARTED.reset(token)


def tree_tracer(
    tracing: Tracing | None,
    *,
    thread_id: str | None,
    path: str | None = None,
    run_id: str | None = None,
) -> Callable[[Event], None] | None:
    """The event consumer that traces one top-level run and records its metrics,
    or None when neither is set up.

    Called once per run, where the run is ordered: the OpenTelemetry context
    current there becomes the run's parent. Given the run's ``path`` and
    ``run_id``, its top-level span starts here and now (so the run's trace is
    known at once, see :func:`run_traces`), else at its ``RunStarted``.

    The consumer has a true ``structural_only``: it reads a run's structure,
    never token deltas or state snapshots (:func:`deepactors.events.wants_detail`).
    """
    spans = _tracer_provider(tracing)
    meters = _meter_provider(tracing)
    if spans is None and meters is None:
        return None
    consumers: list[Callable[[Event], None]] = []
    if spans is not None:
        capture = None if tracing is None else tracing.capture_content
        if capture is None:
            capture = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true")
        from ._tree import TreeTracer

        tracer = TreeTracer(
            spans, capture_content=capture, thread_id=thread_id, path=path, run_id=run_id
        )
        started = _STARTED.get()
        root = tracer.root
        if started is not None and root is not None:
            context = root.get_span_context()
            trace_id, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
            parent = f"00-{trace_id}-{span_id}-{int(context.trace_flags):02x}"
            started.append(RunTrace(trace_id=trace_id, span_id=span_id, traceparent=parent))
        consumers.append(tracer)
    if meters is not None:
        from ._metrics import TreeMetrics, instruments_of

        consumers.append(TreeMetrics(instruments_of(meters)))
    if len(consumers) == 1:
        return consumers[0]
    return _Both(consumers[0], consumers[1])


class _Both:
    """Two consumers of the same events (the tracer and the metrics)."""

    structural_only: ClassVar[bool] = True
    __slots__ = ("_first", "_second")

    def __init__(self, first: Callable[[Event], None], second: Callable[[Event], None]) -> None:
        self._first = first
        self._second = second

    def __call__(self, event: Event) -> None:
        self._first(event)
        self._second(event)


def _tracer_provider(tracing: Tracing | None) -> TracerProvider | None:
    provider = None if tracing is None else tracing.tracer_provider
    if provider is not None:
        return provider
    if "opentelemetry.trace" not in sys.modules:
        return None  # never imported: nobody set a provider up
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _meter_provider(tracing: Tracing | None) -> MeterProvider | None:
    provider = None if tracing is None else tracing.meter_provider
    if provider is not None:
        return provider
    if "opentelemetry.metrics" not in sys.modules:
        return None
    from opentelemetry import metrics
    from opentelemetry.metrics import NoOpMeterProvider

    provider = metrics.get_meter_provider()
    # The API's default is a proxy of its own (a private class): only a
    # provider someone set is used.
    if isinstance(provider, NoOpMeterProvider) or type(provider).__module__.startswith(
        "opentelemetry.metrics"
    ):
        return None
    return provider


def attach_traceparent(headers: Iterable[tuple[bytes, bytes]]) -> Token[Context] | None:
    """Make a request's W3C trace context current; return the token to detach it.

    None (and nothing done) when OpenTelemetry was never imported or the
    request carries no ``traceparent``: the server calls this for every request.
    """
    if "opentelemetry.trace" not in sys.modules:
        return None
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in (b"traceparent", b"tracestate", b"baggage"):
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    if "traceparent" not in carrier:
        return None
    from opentelemetry import context, propagate

    return context.attach(propagate.extract(carrier))


def detach_traceparent(token: Token[Context]) -> None:
    """Undo :func:`attach_traceparent`."""
    from opentelemetry import context

    context.detach(token)


def outgoing_headers() -> dict[str, str]:
    """The W3C trace context headers for an outgoing request: ``traceparent``
    (and ``tracestate`` or ``baggage`` when set), from the current span.

    Inside a tool call of a traced run, the current span is that call's
    ``execute_tool`` span, so a request made from there continues the run's
    trace on the other side. Empty when OpenTelemetry was never imported or no
    span is current: a caller merges it into its headers on every request,
    at the cost of a dictionary lookup when tracing is off.
    """
    if "opentelemetry.trace" not in sys.modules:
        return {}
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def kept_context() -> Callable[[], object] | None:
    """A callable that makes the OpenTelemetry context current now current again;
    None when OpenTelemetry was never imported (nothing can change it).

    A tracer makes a tool call's span current in the task running the call,
    and undoes that when the call finishes; a lone call runs in its actor's
    own task, and one that ends otherwise (an interrupt, a cancellation) must
    not leave its span current there for the rest of the actor's life.
    """
    context = sys.modules.get("opentelemetry.context")
    if context is None:
        return None
    # The module from sys.modules, not an import statement: this runs for
    # every lone tool call of a traced run.
    get_current = context.get_current
    current = get_current()

    def restore() -> None:
        # Most calls end with their ToolCallFinished, whose span the tracer
        # made current and has undone: nothing left to attach then.
        if get_current() is not current:
            context.attach(current)

    return restore

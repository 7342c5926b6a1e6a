"""OpenTelemetry metrics of runs, from their events (see :mod:`deepactors.tracing`).

The GenAI conventions' client metrics (``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration``) and deepactors' own: dollars spent, tool
calls (and their errors), runs by outcome, actors at work.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ..events import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    RunFinished,
    RunStarted,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    SubagentSpawned,
    ToolCallFinished,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.util.types import AttributeValue

__all__ = ["TreeMetrics", "instruments_of"]

_SCOPE = "deepactors"
# Instruments are made once per meter provider, not per run.
_MADE: weakref.WeakKeyDictionary[MeterProvider, _Instruments] = weakref.WeakKeyDictionary()


class _Instruments:
    __slots__ = ("active", "cost", "duration", "runs", "tokens", "tools")

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(_SCOPE)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens per model call"
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration"
        )
        self.cost = meter.create_counter(
            "deepactors.model.cost", unit="USD", description="Dollars spent on model calls"
        )
        self.tools = meter.create_counter(
            "deepactors.tool.calls", unit="{call}", description="Tool calls, by tool and outcome"
        )
        self.runs = meter.create_counter(
            "deepactors.runs", unit="{run}", description="Top-level runs ended, by outcome"
        )
        self.active = meter.create_up_down_counter(
            "deepactors.actors.active", unit="{actor}", description="Actors at work now"
        )


def instruments_of(provider: MeterProvider) -> _Instruments:
    """The instruments of ``provider``, made on first use."""
    made = _MADE.get(provider)
    if made is None:
        made = _MADE[provider] = _Instruments(provider)
    return made


class TreeMetrics:
    """Records one run's events as metrics (an ``on_event`` consumer)."""

    # It reads a run's structure only (see deepactors.events.wants_detail).
    structural_only: ClassVar[bool] = True

    __slots__ = ("_background", "_calls", "_handlers", "_in", "_open")

    def __init__(self, instruments: _Instruments) -> None:
        self._in = instruments
        # path -> (start, model, provider) of the model call in progress.
        self._calls: dict[str, tuple[float, str, str | None]] = {}
        self._open: set[str] = set()
        self._background: set[str] = set()
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            RunStarted: self._started,
            SubagentSpawned: self._spawned,
            RunFinished: self._run_finished,
            SubagentFinished: self._child_ended,
            SubagentFailed: self._child_ended,
            SubagentCancelled: self._child_ended,
            SubagentInterrupted: self._child_ended,
            ModelCallStarted: self._model_started,
            ModelCallFinished: self._model_finished,
            ToolCallFinished: self._tool_finished,
        }

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _started(self, event: RunStarted) -> None:
        if event.path not in self._open:
            self._open.add(event.path)
            self._in.active.add(1)

    def _spawned(self, event: SubagentSpawned) -> None:
        if event.child not in self._open:
            self._open.add(event.child)
            self._in.active.add(1)
            if event.background:
                self._background.add(event.child)

    def _child_ended(
        self,
        event: SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted,
    ) -> None:
        self._background.discard(event.child)
        if event.child in self._open:
            self._open.discard(event.child)
            self._in.active.add(-1)

    def _run_finished(self, event: RunFinished) -> None:
        # Background tasks working on after the run stay counted until they end.
        ended = {p for p in self._open if p not in self._background}
        if ended:
            self._in.active.add(-len(ended))  # the root, and any child cut short
            self._open -= ended
        self._in.runs.add(1, {"deepactors.outcome": event.outcome})

    def _model_started(self, event: ModelCallStarted) -> None:
        self._calls[event.path] = (time.monotonic(), event.model or "unknown", event.provider)

    def _model_finished(self, event: ModelCallFinished) -> None:
        started = self._calls.pop(event.path, None)
        if started is None:
            return
        start, model, provider = started
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        message = event.message
        if message.model:
            attributes["gen_ai.response.model"] = message.model
        self._in.duration.record(time.monotonic() - start, attributes)
        usage = message.usage
        if usage is not None:
            self._in.tokens.record(usage.input_tokens, {**attributes, "gen_ai.token.type": "input"})
            self._in.tokens.record(
                usage.output_tokens, {**attributes, "gen_ai.token.type": "output"}
            )
            if usage.cost_usd:
                self._in.cost.add(usage.cost_usd, attributes)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        self._in.tools.add(
            1,
            {
                "gen_ai.tool.name": event.call.name,
                "deepactors.outcome": "error" if event.result.status == "error" else "success",
            },
        )

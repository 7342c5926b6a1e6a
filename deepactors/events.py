"""Typed events a run streams to its listeners (``agent.astream``).

Every event carries the ``path`` of the actor it comes from (``main``,
``main/task-2:researcher``), so a consumer can tell a subagent's model call from
the main agent's while both run. Events are built only when someone listens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, final

from .messages import AssistantMessage, ToolCall, ToolMessage, Usage
from .state import Todo

__all__ = [
    "BudgetExhausted",
    "ContextSummarized",
    "CustomEvent",
    "Event",
    "FileChanged",
    "Interrupted",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelDelta",
    "ModelFallback",
    "ModelRetry",
    "RunFinished",
    "RunStarted",
    "SkillSkipped",
    "StateUpdated",
    "SubagentCancelled",
    "SubagentFailed",
    "SubagentFinished",
    "SubagentInterrupted",
    "SubagentSpawned",
    "TodosUpdated",
    "ToolCallFinished",
    "ToolCallStarted",
    "describe",
    "wants_detail",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event.

    Attributes:
        path: The actor the event comes from.
        run_id: The run of that actor.
    """

    path: str
    run_id: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Event):
    """An actor began a run."""

    thread_id: str | None = None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(Event):
    """An actor's run ended.

    Attributes:
        outcome: ``completed``, ``interrupted``, ``failed``, ``cancelled`` or ``timed_out``.
        usage: Tokens spent by this actor and everything under it.
    """

    outcome: Literal["completed", "interrupted", "failed", "cancelled", "timed_out"]
    usage: Usage | None = None
    error: str | None = None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallStarted(Event):
    """A model call is about to be made (any wait for a request slot comes after).

    Attributes:
        model: The name of the model asked (a fallback may answer instead).
        provider: Who serves it (``anthropic``, ``openai``, ...), when known.
    """

    step: int
    model: str | None = None
    provider: str | None = None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDelta(Event):
    """A piece of a streaming answer.

    Attributes:
        kind: ``text``, ``thinking`` or ``tool_input`` (partial JSON of a tool call).
        index: Which content block of the answer the piece belongs to.
    """

    kind: Literal["text", "thinking", "tool_input"]
    text: str
    index: int = 0


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallFinished(Event):
    """A model answered."""

    step: int
    message: AssistantMessage


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFallback(Event):
    """A model failed past its retries; the next model of a fallback chain is asked.

    Attributes:
        failed: The model that failed.
        error: Its error.
        next: The model asked instead (whose answer's ``model`` names who answered).
    """

    failed: str
    error: str
    next: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExhausted(Event):
    """The run's budget refused a call: a model call was not made, or a tool call not run.

    Attributes:
        resource: ``model_calls``, ``input_tokens``, ``output_tokens``, ``tool_calls``
            or ``usd``.
        limit: The limit of the budget that refused (the tree's, or a subagent's own;
            dollars for ``usd``).
        spent: How much of it was spent then.
    """

    resource: str
    limit: float
    spent: float


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(Event):
    """A tool call began running."""

    call: ToolCall


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished(Event):
    """A tool call produced its result."""

    call: ToolCall
    result: ToolMessage


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TodosUpdated(Event):
    """The plan changed."""

    todos: Sequence[Todo]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StateUpdated(Event):
    """An actor's state changed (an input, a model answer, a tool result, a hook).

    Attributes:
        update: The update as applied, channel by channel (a subagent's diff
            replaced by its effect).
        values: The actor's whole state after it (a shallow copy).
    """

    update: Mapping[str, Any]
    values: Mapping[str, Any]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FileChanged(Event):
    """A file in agent state was created, changed or deleted."""

    file_path: str
    change: Literal["created", "modified", "deleted"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentSpawned(Event):
    """A child actor started; ``child`` is its path, ``call_id`` the ``task`` call's id.

    ``background``: a background task (``start_async_task``), which may outlive
    the run that started it; its events reach that run's tracer until it ends.
    """

    child: str
    subagent_type: str
    description: str
    call_id: str | None = None
    background: bool = False


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFinished(Event):
    """A child finished; its answer and files merge when its parent's tool step ends.

    Attributes:
        usage: Tokens spent by the child and everything under it.
    """

    child: str
    usage: Usage | None = None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFailed(Event):
    """A child raised; its error became the tool result. Nothing of it was merged."""

    child: str
    error: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentCancelled(Event):
    """A child was cancelled or passed its deadline. Nothing of it was merged."""

    child: str
    timed_out: bool


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentInterrupted(Event):
    """A tool call inside a child waits for a human; the parent's run stops too.

    Attributes:
        child: The child's actor path.
        requests: The pending requests (each names the actor that made the call).
    """

    child: str
    requests: Sequence[Mapping[str, Any]]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupted(Event):
    """The run stopped to wait for human decisions."""

    requests: Sequence[Mapping[str, Any]]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRetry(Event):
    """A model call failed with a retryable error and will be tried again.

    Attributes:
        attempt: The attempt that failed (1 for the first call).
        delay: Seconds until the next attempt.
        error: The error, as ``Type: message``.
    """

    attempt: int
    delay: float
    error: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSummarized(Event):
    """Older messages were replaced by a summary in what the model sees.

    The thread's state keeps every message; the dropped ones were also appended
    to ``file_path`` in the agent's backend, where the model can read them back.

    Attributes:
        file_path: Where the dropped messages were saved (None: saving failed).
        messages_dropped: How many messages this summary replaced.
        tokens_before: The size of the conversation the model would have seen.
        tokens_after: Its size with the summary instead.
        reason: ``"trigger"`` (over the threshold), ``"overflow"`` (the model
            refused the request as too long) or ``"tool"`` (``compact_conversation``).
    """

    file_path: str | None
    messages_dropped: int
    tokens_before: int
    tokens_after: int
    reason: Literal["trigger", "overflow", "tool"] = "trigger"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSkipped(Event):
    """A ``SKILL.md`` could not be used and was left out; the other skills load.

    Attributes:
        file_path: The skill file.
        reason: What is wrong with it.
    """

    file_path: str
    reason: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CustomEvent(Event):
    """Anything a tool wrote with ``runtime.write(...)``."""

    data: Any


def describe(event: Event) -> str:
    """A one-line human-readable rendering of an event (used by the CLI)."""
    match event:
        case RunStarted():
            return "run started"
        case RunFinished(outcome=outcome, error=error):
            return f"run {outcome}" + (f": {error}" if error else "")
        case ModelCallStarted(step=step):
            return f"model call #{step}"
        case ModelCallFinished(message=msg):
            calls = ", ".join(f"{c.name}({_args(c.args)})" for c in msg.tool_calls)
            text = _clip(msg.text)
            if calls and text:
                return f"model: {text} -> {calls}"
            return f"model -> {calls}" if calls else f"model: {text}"
        case ModelDelta(text=text):
            return text
        case ModelFallback(failed=failed, next=nxt, error=error):
            return f"model {failed} failed ({_clip(error, 60)}); asking {nxt}"
        case BudgetExhausted(resource=resource, limit=limit, spent=spent):
            return f"budget spent: {resource} {spent} of {limit}"
        case ToolCallStarted(call=call):
            return f"tool {call.name}({_args(call.args)})"
        case ToolCallFinished(call=call, result=result):
            mark = "ok" if result.status == "success" else "ERROR"
            return f"tool {call.name} {mark}: {_clip(result.text)}"
        case TodosUpdated(todos=todos):
            marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
            return "plan: " + "  ".join(f"{marks[t.status]} {t.content}" for t in todos)
        case StateUpdated(update=update):
            return f"state updated: {', '.join(update)}"
        case FileChanged(file_path=fp, change=change):
            return f"file {change}: {fp}"
        case SubagentSpawned(child=child, description=d):
            return f"spawned {child}: {_clip(d)}"
        case SubagentFinished(child=child):
            return f"finished {child}"
        case SubagentFailed(child=child, error=error):
            return f"failed {child}: {error}"
        case SubagentCancelled(child=child, timed_out=timed_out):
            return f"{'timed out' if timed_out else 'cancelled'} {child}"
        case SubagentInterrupted(child=child, requests=requests):
            return f"subagent {child} waits for {len(requests)} decision(s)"
        case Interrupted(requests=reqs):
            return f"interrupted: {len(reqs)} decision(s) needed"
        case ModelRetry(attempt=attempt, delay=delay, error=error):
            return (
                f"model call failed (attempt {attempt}), retrying in {delay:.1f}s: {_clip(error)}"
            )
        case ContextSummarized(messages_dropped=n, tokens_before=a, tokens_after=b, file_path=f):
            where = f"; saved to {f}" if f else ""
            return f"context summarized: {n} messages, ~{a} -> ~{b} tokens{where}"
        case SkillSkipped(file_path=fp, reason=reason):
            return f"skill skipped: {fp}: {_clip(reason)}"
        case CustomEvent(data=data):
            return f"custom: {_clip(str(data))}"
    return type(event).__name__


def wants_detail(emit: Callable[[Event], None]) -> bool:
    """Whether the listeners behind ``emit`` read a run's detail: token deltas
    (:class:`ModelDelta`, for which a model's answer is streamed) and state
    snapshots (:class:`StateUpdated`, :class:`TodosUpdated`, :class:`FileChanged`).

    A listener that reads only a run's structure (runs, model and tool calls,
    subagents: a tracer) says so with a true ``structural_only`` attribute;
    building the detail for it alone would be work done for nobody, and its
    runs call their models as untraced ones do.
    """
    return not getattr(emit, "structural_only", False)


def _args(args: Mapping[str, object]) -> str:
    return _clip(", ".join(f"{k}={v!r}" for k, v in args.items()), 60)


def _clip(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."

"""What the runtime runs: an agent's parts resolved once, and a run's validated input.

:class:`AgentSpec` is everything every run of one agent shares: model, tools,
system prompt, middleware (with its hook lists and wrapper chains folded once),
channels, and where files, memories and checkpoints live. The agent facade
holds one; subagent middleware hold their children's. The runtime needs nothing
else of an agent, so it never imports the facade.

This is the hot path's setup: everything that can be decided once per agent is
decided here, so nothing is built per turn for listeners or logs that are not
there.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, cast, final

from pydantic import TypeAdapter, ValidationError

from ..budget import Budget
from ..context import RunContext
from ..errors import ConfigurationError, InputError
from ..hooks import (
    AgentMiddleware,
    HookResult,
    ModelHandler,
    ToolHandler,
    overrides,
)
from ..interrupts import END_PENDING
from ..limits import NO_BREAKPOINTS, Breakpoints, Limits
from ..models import ChatModel
from ..persistence import check_thread_id
from ..state import Channel, State, validate_input
from ..tools import Command, Tool
from ._model_call import call_model
from ._tool_call import execute_tool

if TYPE_CHECKING:
    from ..backends import Backend
    from ..persistence import Checkpointer, Store

__all__ = [
    "AgentSpec",
    "HasSpec",
    "Hook",
    "RunInput",
    "check_context",
    "check_thread",
    "prepare_input",
]

Hook = Callable[[State, RunContext], Awaitable[HookResult]]


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AgentSpec:
    """An agent's parts, resolved once: what every run of it shares.

    Attributes:
        name: The agent's name; the root actor path of its runs.
        model: The model it calls.
        tools: Tools by name (the user's and the middleware's).
        system_prompt: The full system prompt (user text + middleware sections).
        middleware: The stack, outermost first.
        channels: Every state channel (built-in + middleware-declared).
        max_steps: Model calls allowed per run.
        debug: Log every hook and model call.
        backend: Where the file tools keep files (None: no file tools' backend).
        store: The long-term store, if any.
        checkpointer: Where threads are saved, if anywhere.
        context_schema: What a run's ``context=`` must be (a pydantic model,
            dataclass or TypedDict); ``None`` takes any mapping.
        starts_background: Whether a run of it can start background tasks (a
            middleware of its stack says so, for itself or a subagent): only
            then does its thread actor keep a registry of them.
        breakpoints: Where its top-level runs stop unless a run says otherwise
            (LangGraph's ``compile(interrupt_before=..., interrupt_after=...)``).
    """

    name: str
    model: ChatModel
    tools: Mapping[str, Tool]
    system_prompt: str | None
    middleware: tuple[AgentMiddleware, ...]
    channels: Mapping[str, Channel]
    max_steps: int = 1000
    debug: bool = False
    backend: Backend | None = None
    store: Store | None = None
    checkpointer: Checkpointer | None = None
    context_schema: object = None
    breakpoints: Breakpoints = NO_BREAKPOINTS
    # Resolved in __post_init__:
    tool_list: tuple[Tool, ...] = field(init=False)
    before_agent: tuple[Hook, ...] = field(init=False)
    before_model: tuple[Hook, ...] = field(init=False)
    after_model: tuple[Hook, ...] = field(init=False)
    after_agent: tuple[Hook, ...] = field(init=False)
    call_model: ModelHandler = field(init=False)
    call_tool: ToolHandler = field(init=False)
    context_adapter: TypeAdapter[Any] | None = field(init=False)
    starts_background: bool = field(init=False)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        if self.breakpoints and self.checkpointer is None:
            raise ConfigurationError(
                "interrupt_before/interrupt_after stop runs to continue them later: "
                "give the agent a checkpointer to keep its threads in"
            )
        if not self.name or "/" in self.name:
            raise ConfigurationError(
                f"agent name {self.name!r} must be non-empty and contain no '/'"
            )
        stack = list(self.middleware)
        rev = list(reversed(stack))
        model_handler: ModelHandler = functools.partial(call_model, self.model)
        tool_handler: ToolHandler = execute_tool
        for mw in rev:  # first in the list = outermost
            if overrides(mw, "wrap_model_call"):
                model_handler = functools.partial(mw.wrap_model_call, handler=model_handler)
            if overrides(mw, "wrap_tool_call"):
                tool_handler = functools.partial(mw.wrap_tool_call, handler=tool_handler)
        # before_* in list order, after_* in reverse: the stack nests like wrappers.
        resolved: dict[str, object] = {
            "tool_list": tuple(self.tools.values()),
            "before_agent": tuple(mw.before_agent for mw in stack if overrides(mw, "before_agent")),
            "before_model": tuple(mw.before_model for mw in stack if overrides(mw, "before_model")),
            "after_model": tuple(mw.after_model for mw in rev if overrides(mw, "after_model")),
            "after_agent": tuple(mw.after_agent for mw in rev if overrides(mw, "after_agent")),
            "call_model": model_handler,
            "call_tool": tool_handler,
            "context_adapter": _context_adapter(self.context_schema),
            "starts_background": any(mw.starts_background for mw in stack),
        }
        for name, value in resolved.items():
            object.__setattr__(self, name, value)


def _context_adapter(schema: Any) -> TypeAdapter[Any] | None:
    if schema is None:
        return None
    try:
        return TypeAdapter(schema)
    except Exception as exc:  # pydantic's schema errors have no common base
        raise ConfigurationError(
            f"context_schema {schema!r} is not a type pydantic can validate: {exc}"
        ) from exc


class HasSpec(Protocol):
    """Anything the runtime can run: an agent facade exposes its :class:`AgentSpec`."""

    @property
    def spec(self) -> AgentSpec:
        """The agent's resolved parts."""
        ...


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunInput:
    """A run's input, validated once at the edge.

    Attributes:
        values: The state update the run starts with (converted channel values).
        resume: The caller's decisions for an interrupted thread, unparsed
            (they are matched against the saved requests when the thread is read).
        resuming: Whether the input continues a saved thread (``None`` or a
            ``Command(resume=...)``) rather than adding to it.
        max_steps: Model calls allowed to each agent of this run's tree, when the
            caller set a limit for this run (else each agent's own).
        update_only: Apply ``values`` to the thread's state (recorded like any
            update) and stop: no hook, no model call (LangGraph's ``update_state``).
        context: The run's context, checked against the agent's ``context_schema``.
        budget: The budget of the run and every subagent under it, if any.
        identity: Who the run acts for (a server's authenticated caller), if anyone.
        stateless: A run whose thread is thrown away when it ends (a server's
            stateless run): it needs no checkpointer even if its agent may stop
            for a human, and only an actual stop is an error (nothing would be
            kept to continue from).
        breakpoints: Where the run stops (``interrupt_before``/``interrupt_after``);
            None: the agent's own.
        goto: The node a continued thread goes on at (``Command(goto=...)``):
            ``"model"`` asks the model next, ``"tools"`` runs the pending calls.
    """

    values: Mapping[str, Any]
    resume: object = None
    resuming: bool = False
    max_steps: int | None = None
    update_only: bool = False
    context: object = field(default_factory=dict)
    budget: Budget | None = None
    identity: object = None
    stateless: bool = False
    breakpoints: Breakpoints | None = None
    goto: str | None = None


END = "__end__"
GOTO_NODES = ("model", "tools")
"""Where ``Command(goto=...)`` continues a thread (``"__end__"`` is a resume: END_PENDING)."""


def prepare_input(
    spec: AgentSpec,
    input: object,
    thread_id: str | None,
    *,
    context: object = None,
    limits: Limits | None = None,
    budget: object = None,
    identity: object = None,
    breakpoints: Breakpoints | None = None,
    stateless: bool = False,
) -> RunInput:
    """Check a run's input, context and limits against the agent, before anything runs.

    An input that is a :class:`RunInput` already is taken as it is, with the
    ``context`` and limits given here (if any) checked and put in it.

    Args:
        spec: The agent.
        input: What ``DeepAgent.ainvoke`` takes, or a :class:`RunInput`.
        thread_id: The thread the run is for, if any.
        context: The run's context (``run.context``).
        limits: The run's model calls and budget (its timeout is its handle's).
        budget: The run's budget, as ``limits`` would give it.
        identity: Who the run acts for.
        breakpoints: Where the run stops (None: where the agent's runs do).
        stateless: The run's thread is thrown away when it ends (see
            :attr:`RunInput.stateless`).

    Raises:
        InputError: What is wrong, in words a caller can act on.
    """
    if budget is not None:
        # Limits says what is wrong with a budget that is not a Budget.
        steps = None if limits is None else limits.max_steps
        limits = Limits(max_steps=steps, budget=cast(Budget, budget))
    if isinstance(input, RunInput):
        if context is not None:
            input = replace(input, context=check_context(spec, context))
        if stateless and not input.stateless:
            input = replace(input, stateless=True)
        return _stopping(spec, _limited(input, limits), breakpoints)
    # Made stateless as it is built, not by a replace after: a server makes one
    # per request, before the request's first byte (a replace is a copy).
    run_input = _prepare_values(spec, input, thread_id, identity, stateless)
    if context is None and spec.context_adapter is None:
        # Its context is {} already: no copy (a server makes one per run).
        return _stopping(spec, _limited(run_input, limits), breakpoints)
    run_input = replace(run_input, context=check_context(spec, context))
    return _stopping(spec, _limited(run_input, limits), breakpoints)


def _stopping(spec: AgentSpec, run_input: RunInput, breakpoints: Breakpoints | None) -> RunInput:
    """``run_input`` with its breakpoints (None: the agent's), which need a checkpointer."""
    if breakpoints is None:
        return run_input
    if breakpoints and spec.checkpointer is None:
        raise InputError(
            "interrupt_before/interrupt_after stop a run to continue it later; this agent "
            "has no checkpointer to keep the thread in"
        )
    return replace(run_input, breakpoints=breakpoints)


def _limited(run_input: RunInput, limits: Limits | None) -> RunInput:
    """``run_input`` with the model calls and budget ``limits`` set (if any)."""
    if limits is None or (limits.max_steps is None and limits.budget is None):
        return run_input
    return replace(
        run_input,
        max_steps=run_input.max_steps if limits.max_steps is None else limits.max_steps,
        budget=run_input.budget if limits.budget is None else limits.budget,
    )


def check_thread(thread_id: object) -> None:
    """Refuse a thread id no checkpointer can store, before anything runs.

    Raises:
        InputError: Not a non-empty string, or it holds a lone surrogate
            (``'\\ud800'``: no database can store it as text).
    """
    if not isinstance(thread_id, str) or not thread_id:
        raise InputError(f"thread_id must be a non-empty string, not {thread_id!r}")
    try:
        check_thread_id(thread_id)
    except (TypeError, ValueError) as exc:
        raise InputError(f"thread_id {thread_id!r}: {exc}") from None


def check_context(spec: AgentSpec, context: object) -> object:
    """A run's ``context=`` as the agent's hooks and tools will see it.

    Without a ``context_schema``: the mapping given (``{}`` for None). With one:
    an instance of it, validated (``None`` validates ``{}``, which works when
    every field has a default).

    Raises:
        InputError: The context does not fit; the error names the field.
    """
    adapter = spec.context_adapter
    if adapter is None:
        if context is None:
            return {}
        if not isinstance(context, Mapping):
            raise InputError(f"context must be a dict, not {type(context).__name__}")
        return context
    try:
        return adapter.validate_python({} if context is None else context)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "context"
        raise InputError(
            f"context does not fit the agent's context_schema: {where}: {err['msg']}"
        ) from None


def _command_input(spec: AgentSpec, command: Command, identity: object) -> RunInput:
    """A ``Command`` as a run's input: its update, then its resume or its goto."""
    goto, resume = command.goto, command.resume
    if goto == END:
        # LangGraph's goto END: the pending calls answered as not run, no model call.
        goto, resume = None, END_PENDING
    if resume is None and goto is None and not command.update:
        raise InputError("as a run's input, a Command needs resume=, goto= or update=")
    if goto is not None and goto not in GOTO_NODES:
        raise InputError(f"Command goto must be one of {(*GOTO_NODES, END)}, not {goto!r}")
    if spec.checkpointer is None:
        raise InputError(
            "a Command continues a saved thread; this agent has no checkpointer to continue it from"
        )
    # As update_state (and LangGraph's Command(update=...)): every channel, those
    # only tools write in a run (todos) included.
    update = command.update
    values = validate_input(spec.channels, update, private=True) if update else {}
    return RunInput(values=values, resume=resume, resuming=True, goto=goto, identity=identity)


def _prepare_values(
    spec: AgentSpec,
    input: object,
    thread_id: str | None,
    identity: object = None,
    stateless: bool = False,
) -> RunInput:
    if thread_id is not None:
        check_thread(thread_id)
    if spec.checkpointer is not None and thread_id is None:
        raise InputError(
            "this agent has a checkpointer: pass thread_id= to say which thread to save"
        )
    if input is None:
        if spec.checkpointer is None or thread_id is None:
            raise InputError(
                "input=None continues a saved thread; it needs a checkpointer and a thread_id"
            )
        return RunInput(values={}, resuming=True, identity=identity, stateless=stateless)
    if isinstance(input, Command):
        resumed = _command_input(spec, input, identity)
        return replace(resumed, stateless=True) if stateless else resumed
    if not isinstance(input, Mapping | str):
        raise InputError(
            f"input must be a dict like {{'messages': [...]}}, not {type(input).__name__}"
        )
    values = validate_input(spec.channels, input)
    if "messages" in values and not values["messages"]:
        raise InputError("'messages' is empty: give at least one message for the agent")
    return RunInput(values=values, identity=identity, stateless=stateless)

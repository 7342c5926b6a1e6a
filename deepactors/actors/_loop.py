"""The agent loop of one run.

One run: ``before_agent`` hooks, then turns of (``before_model`` hooks -> the
model call through the ``wrap_model_call`` chain -> ``after_model`` hooks -> every
tool call of that answer, concurrently, each through the ``wrap_tool_call`` chain;
see :mod:`._tool_step`) until the model answers without tool calls, then
``after_agent`` hooks.

This is the hot path of the whole library: everything that can be decided once
per agent is decided in :class:`~._spec.AgentSpec`, and nothing is built per
turn for listeners or logs that are not there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import anyio
import anyio.lowlevel

from .._core.logs import get_logger
from ..context import Inbox, RunContext
from ..errors import ConfigurationError, StepLimitExceeded
from ..events import ModelCallFinished, ModelCallStarted
from ..interrupts import ActionRequest, Decision, Interrupt
from ..limits import NO_BREAKPOINTS, Breakpoints
from ..messages import AssistantMessage, Message, ToolCall, ToolMessage, Usage, UserMessage
from ..models import ModelRequest
from ..state import State
from ..tracing import provider_of
from ._heap import FanoutHold
from ._spec import AgentSpec, Hook
from ._tool_step import run_tools

__all__ = ["BreakpointReached", "run_loop", "unanswered_calls"]

_log = get_logger("deepactors")

_JUMPS = ("model", "tools", "end")


async def _apply_hooks(
    hooks: Sequence[Hook], state: State, run: RunContext, debug: bool
) -> str | None:
    """Run hooks in order; return the first jump any of them asked for."""
    jump: str | None = None
    for hook in hooks:
        if debug:
            _log.debug("hook", hook=getattr(hook, "__qualname__", repr(hook)), path=run.path)
        result = await hook(state, run)
        if result:
            update = dict(result)
            target = update.pop("jump_to", None)
            if update:
                state.apply(update)
            if target is not None:
                if target not in _JUMPS:
                    raise ConfigurationError(f"jump_to must be one of {_JUMPS}, not {target!r}")
                jump = jump or target
    return jump


class BreakpointReached(Exception):
    """The run reached one of its breakpoints (see :class:`~deepactors.limits.Breakpoints`).

    Attributes:
        ran: The node that ran just before (None: none of this run's yet).
        next: The node that would run next (None: the loop would end).
    """

    def __init__(self, *, ran: str | None, next: str | None) -> None:
        super().__init__(f"stopped after {ran!r}, before {next!r}")
        self.ran = ran
        self.next = next


class _Points:
    """The points between a run's nodes, and whether the run stops at each.

    The first point a continued run reaches is where its thread stood when it
    stopped: it goes past it (as LangGraph's does, which stops again only after
    something ran).
    """

    __slots__ = ("_breakpoints", "_passing")

    def __init__(self, breakpoints: Breakpoints, *, continued: bool) -> None:
        self._breakpoints = breakpoints
        self._passing = continued

    def reach(
        self,
        *,
        ran: str | None,
        next: str | None,
        asks: Callable[[], list[ActionRequest]] | None = None,
    ) -> None:
        """Raise :class:`BreakpointReached` when the run stops here.

        Raises:
            Interrupt: It stops here, and ``asks`` gives what a human must answer
                first (an approval of the tool step's calls): that stop, not the
                breakpoint's, as LangGraph's approval step comes before its tools.
        """
        if self._passing:
            self._passing = False
            return
        if self._breakpoints.stops(ran=ran, next=next):
            requests = asks() if asks is not None else None
            if requests:
                raise Interrupt(requests)
            raise BreakpointReached(ran=ran, next=next)


def unanswered_calls(messages: Sequence[Message]) -> tuple[AssistantMessage | None, list[ToolCall]]:
    """The newest assistant message and those of its tool calls that have no result yet."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, ToolMessage):
            answered.add(m.tool_call_id)
        elif isinstance(m, AssistantMessage):
            if not answered:  # a turn just made (100,000 calls, say): copied at C speed
                return m, list(m.tool_calls)
            return m, [c for c in m.tool_calls if c.id not in answered]
        else:
            break
    return None, []


async def run_loop(
    spec: AgentSpec,
    state: State,
    run: RunContext,
    *,
    breakpoints: Breakpoints = NO_BREAKPOINTS,
    continued: bool = False,
    start: str | None = None,
) -> Usage | None:
    """Run the agent loop on ``state`` until the model is done.

    Args:
        spec: The agent.
        state: Its state.
        run: The run's context.
        breakpoints: Where the run stops (a top-level run's, if the caller set any).
        continued: The run continues a thread that stopped (it goes past the
            point it stopped at).
        start: The node to begin at (``Command(goto=...)``): ``"model"`` or
            ``"tools"``; None: as the history says.

    Returns:
        The tokens spent by this run and its subagents, if the model reports usage.

    Raises:
        StepLimitExceeded: More than ``spec.max_steps`` model calls.
        BreakpointReached: The run stopped at one of ``breakpoints``.
    """
    points = _Points(breakpoints, continued=continued) if breakpoints else None
    ran: str | None = None  # the node that ran last, for breakpoints after it
    debug = spec.debug
    max_steps = run.tree.max_steps or spec.max_steps
    jump = await _first_jump(spec, state, run, start, debug)
    step = 0
    with FanoutHold() as fanout:
        while jump != "end":
            await _check_deadline()
            if jump != "tools":
                decisions = run.tree.decisions
                if decisions and _ends_the_tree(decisions):
                    break
                if points is not None:
                    points.reach(ran=ran, next="model")
                inbox = run.inbox
                if inbox is not None and inbox.pending:
                    _read_inbox(inbox, state)
                jump = await _apply_hooks(spec.before_model, state, run, debug)
                if jump == "end":
                    break
                if jump != "tools":
                    if step >= max_steps:
                        raise _too_many_steps(run, step, max_steps)
                    step += 1
                    jump = await _model_turn(spec, state, run, step, debug)
                    ran = "model"
                    if jump == "end":
                        break
                    if jump == "model":
                        continue
            jump = None
            _, pending = unanswered_calls(state.messages)
            if points is not None:
                points.reach(
                    ran=ran,
                    next="tools" if pending else None,
                    asks=functools.partial(_asks, spec, pending, run),
                )
            if not pending:
                break
            fanout.step(pending)
            await run_tools(spec, state, run, pending)
            ran = "tools"
        await _apply_hooks(spec.after_agent, state, run, debug)
    await _check_deadline()
    return run.usage


async def _first_jump(
    spec: AgentSpec, state: State, run: RunContext, start: str | None, debug: bool
) -> str | None:
    """The ``before_agent`` hooks, then where the loop begins (``"tools"``,
    ``"end"``, or None: at the model)."""
    jump = await _apply_hooks(spec.before_agent, state, run, debug)
    if jump is None and start is not None:
        jump = "tools" if start == "tools" else None
    elif jump is None and unanswered_calls(state.messages)[1]:
        # The history ends with tool calls that have no results (an interrupted
        # run): run them before asking the model anything.
        jump = "tools"
    return jump


def _ends_the_tree(decisions: Mapping[str, Decision]) -> bool:
    """Whether the run was resumed to end the pending work (LangGraph's goto END).

    The calls were answered as not run; no agent of the tree asks its model
    anything more, wherever in the tree the stop was.
    """
    return any(d.type == "end" for d in decisions.values())


def _read_inbox(inbox: Inbox, state: State) -> None:
    """Add what was sent while the actor worked (a background subagent told
    more): read before the model is asked anything new."""
    for text in inbox.take():
        state.add_message(UserMessage(content=text))


def _too_many_steps(run: RunContext, step: int, max_steps: int) -> StepLimitExceeded:
    return StepLimitExceeded(
        f"agent {run.path!r} made {step} model calls without finishing (max_steps={max_steps})"
    )


def _asks(spec: AgentSpec, calls: Sequence[ToolCall], run: RunContext) -> list[ActionRequest]:
    """What the agent's middleware must ask a human before any of ``calls`` runs."""
    return [r for mw in spec.middleware for r in mw.asks_before(calls, run)]


async def _model_turn(
    spec: AgentSpec, state: State, run: RunContext, step: int, debug: bool
) -> str | None:
    """The run's ``step``-th model call and its ``after_model`` hooks; their jump, if any."""
    run.step = step
    journal = run.journal
    if journal is not None:
        # Durable before the model is asked anything new.
        await journal.sync()
    emit = run.emit
    if emit is not None:
        model = spec.model
        emit(
            ModelCallStarted(
                path=run.path,
                run_id=run.run_id,
                step=step,
                model=model.model_name,
                provider=provider_of(model),
            )
        )
    if debug:
        _log.debug("model call", path=run.path, step=step)
    request = ModelRequest(
        # O(1): a view that never changes, not a copy per turn.
        messages=state.messages.view(),
        system_prompt=spec.system_prompt,
        tools=spec.tool_list,
        state=state,
        run=run,
        model=spec.model,
    )
    message = await spec.call_model(request)
    run.add_usage(message.usage)
    state.add_message(message)
    pacer = run.tree.pacer
    if pacer is not None and pacer.due():
        # Answers arrive in waves (a fan-out's calls return together): what
        # follows waits for its slice. The next pause is a tool call's start
        # (or the next answer).
        await pacer.wait()
    if emit is not None:
        emit(ModelCallFinished(path=run.path, run_id=run.run_id, step=step, message=message))
    return await _apply_hooks(spec.after_model, state, run, debug)


async def _check_deadline() -> None:
    """Raise the cancellation of a deadline that has passed, even one no await saw.

    A deadline is delivered only when the task yields to the event loop; a turn
    with a zero-latency model and quick tools may never yield, and without this
    check a run could finish after its deadline (``timeout=0`` would return).
    """
    await anyio.lowlevel.checkpoint_if_cancelled()
    if anyio.current_time() >= anyio.current_effective_deadline():
        # Passed but not delivered yet (asyncio delivers it from a timer callback
        # that runs after this task's next step): yield until it is.
        for _ in range(100):
            await anyio.lowlevel.checkpoint()

"""A top-level run's input against its thread: decisions, ``goto``, continuation.

Before a thread actor's run calls anything, its input is judged on the thread as
its records left it: a ``Command(resume=...)`` answers the requests the thread
stopped for, a ``Command(goto=...)`` must be a node the thread can go on at, input
``None`` continues what is left to do, and new messages must give the model
something to answer. A refused input changes nothing; an update alone, or
nothing to continue, runs nothing (its values applied).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._core.jsonvalue import JSONObject
from ..context import RunContext
from ..errors import InputError
from ..history import MessageList
from ..interrupts import ActionRequest, parse_decisions
from ..messages import AssistantMessage, Message, ToolMessage
from ..state import State
from ._journal import Journal
from ._loop import unanswered_calls
from ._spec import RunInput
from ._threads import last_turn, next_step

__all__ = ["Taken", "take_input"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Taken:
    """What a run's input leaves the run to do.

    Attributes:
        runs: Whether the run runs the loop (False: an update alone, or nothing
            to continue; the caller gets the thread's state).
        continued: Whether it goes past the first breakpoint it reaches: only a
            run that continues a stop (the thread stood at a breakpoint, or it
            answers an approval). A run continued after a crash stops at the
            breakpoints it had not reached.
    """

    runs: bool
    continued: bool


_NOTHING_RUNS = Taken(runs=False, continued=False)


def take_input(
    run: RunContext, state: State, run_input: RunInput, journal: Journal | None
) -> Taken:
    """Take the run's decisions, its ``goto`` or its continuation.

    An update alone, or nothing to continue on a thread that finished, runs
    nothing (its values applied: a ``Command``'s update, as LangGraph's); the
    caller gets the thread's state.

    Returns:
        Whether it runs the loop, and whether it goes past the first breakpoint
        it reaches (see :class:`Taken`).

    Raises:
        InputError: Decisions for no pending request, a ``goto`` the thread
            cannot take, or a run with nothing to answer.
    """
    thread_id = run.thread_id
    if run_input.update_only:
        state.apply(run_input.values)
        return _NOTHING_RUNS
    stopped = _past_breakpoint(run)
    if run_input.resume is not None and not stopped:
        _take_decisions(run, state, run_input.resume)
        return Taken(runs=True, continued=True)
    if run_input.goto is not None:
        _check_goto(state, run_input.goto, thread_id, run_input.values)
    elif run_input.resuming and (awaiting := _awaiting(run)):
        # Continued with no decision: the calls stop the run again,
        # whichever agent continues the thread (there is work: them).
        run.tree.awaiting = awaiting
    elif not _has_work(state, run_input, thread_id, _ended_turn(journal, run.path)):
        # ainvoke(None) on a thread that finished: nothing to continue, so
        # nothing is called.
        if run_input.values:
            state.apply(run_input.values)
        return _NOTHING_RUNS
    return Taken(runs=True, continued=stopped)


def _ended_turn(journal: Journal | None, path: str) -> str | None:
    restored = None if journal is None else journal.restored
    return None if restored is None else restored.ended_turn(path)


def _has_work(
    state: State, run_input: RunInput, thread_id: str | None, ended_turn: str | None
) -> bool:
    """Whether the run has anything to do; refuse one that would ask about nothing.

    Raises:
        InputError: The model would be called with an empty history.
    """
    if run_input.resuming:
        if not state.messages:
            raise InputError(
                f"thread {thread_id!r} has no saved state to continue: start it with input messages"
            )
        # A thread whose pending calls were ended (goto END) finished there.
        return bool(next_step(state.messages, ended_turn))
    incoming = run_input.values.get("messages") or ()
    if not state.messages and not incoming:
        raise InputError("the input has no message for the agent to answer")
    _check_tool_results(state, incoming)
    return True


def _check_tool_results(state: State, incoming: Sequence[object]) -> None:
    """Refuse an input tool result that answers no tool call of the thread.

    The model API rejects a tool result without its call, and the thread would be
    stuck with it; an id the history or the input itself asked for is fine.
    """
    if not any(isinstance(m, ToolMessage) for m in incoming):
        return
    asked = {c.id for m in state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    for message in incoming:
        if isinstance(message, AssistantMessage):
            asked.update(c.id for c in message.tool_calls)
        elif isinstance(message, ToolMessage) and message.tool_call_id not in asked:
            raise InputError(
                f"the input's tool result for call {message.tool_call_id!r} answers no tool "
                "call of this thread; send the assistant message that made the call first"
            )


def _past_breakpoint(run: RunContext) -> bool:
    """Whether the thread stood at a breakpoint; if so, record that this run goes past it.

    Any run that is not a bare update continues from there (input ``None`` or a
    ``Command(resume=...)`` past the point, new input after it), so the thread no
    longer shows the stop once this run starts.
    """
    restored = run.tree.restored
    if restored is None or restored.pending_breakpoint(run.path) is None:
        return False
    if run.journal is not None:
        run.journal.record(run.path, run.step, "resume", {"breakpoint": True})
    return True


def _check_goto(
    state: State, goto: str, thread_id: str | None, update: Mapping[str, object]
) -> None:
    """Refuse a ``Command(goto=...)`` the thread cannot go on with, saying why.

    Judged on the thread as the command's ``update`` leaves it (LangGraph applies
    the update, then goes to the node), without applying it: a refused command
    changes nothing.

    Raises:
        InputError: No saved state; ``"tools"`` with no pending tool call;
            ``"model"`` while tool calls wait for results (the model API
            refuses a call without its result).
    """
    messages: Sequence[Message] = state.messages
    if "messages" in update:
        reducer = state.channels["messages"].reducer
        messages = reducer(MessageList(messages), update["messages"])
    if not messages:
        raise InputError(f"thread {thread_id!r} has no saved state to continue at {goto!r}")
    pending = unanswered_calls(messages)[1]
    if goto == "tools" and not pending:
        raise InputError(
            f"goto 'tools': thread {thread_id!r} has no tool call waiting to run "
            "(its model's last answer made none, or they all have results)"
        )
    if goto == "model" and pending:
        names = ", ".join(sorted({c.name for c in pending}))
        raise InputError(
            f"goto 'model': thread {thread_id!r} has tool calls without results ({names}); "
            "goto 'tools' runs them, or answer them first"
        )


def _awaiting(run: RunContext) -> dict[str, ActionRequest]:
    """The requests the thread stopped for and no resume has answered, by call id."""
    restored = run.tree.restored
    pending = restored.pending_interrupt(run.path) if restored is not None else None
    return {r.id: r for r in pending or ()}


def _take_decisions(run: RunContext, state: State, resume: object) -> None:
    """Match the caller's decisions to the requests the thread stopped for."""
    tree = run.tree
    restored = tree.restored
    pending = restored.pending_interrupt(run.path) if restored is not None else None
    if not pending:
        raise InputError(f"thread {run.thread_id!r} is not waiting for any decision")
    decisions = parse_decisions(resume, pending)
    tree.decisions = decisions
    if tree.journal is not None:
        data: JSONObject = {"ids": [*sorted(decisions)]}
        if any(d.type == "end" for d in decisions.values()):
            # Which turn was ended: the saved thread reads as finished there
            # (next: [], as LangGraph's after a run that ended) until something
            # other than its calls' results comes after it.
            data["ended"] = last_turn(state.messages)
        tree.journal.record(run.path, run.step, "resume", data)

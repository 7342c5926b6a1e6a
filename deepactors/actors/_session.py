"""Sessions: how an actor's run is set up, for thread actors and child actors alike.

This is the one place that builds a :class:`~deepactors.context.RunContext`,
binds the backend to the actor's state, opens or restores the journal, and
attaches the state listeners (events, checkpoints). A thread actor runs a
top-level run with :func:`execute_root`; a child actor opens its run with
:func:`child_session`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from .._core.jsonvalue import JSONObject
from .._core.pacing import Pacer
from ..backends import SandboxKey, sandbox_scope
from ..budget import Budget, BudgetLedger, BudgetReport
from ..context import RunContext, TreeContext, TreeSlot
from ..errors import BudgetExceeded, InputError, InterruptNeedsThread
from ..events import Event, Interrupted, RunStarted
from ..filediff import FileRecord
from ..history import MessageList
from ..interrupts import ActionRequest, Interrupt, interrupt_view, parse_decisions
from ..limits import Breakpoints
from ..messages import AssistantMessage, Message, ToolMessage, Usage, new_id
from ..state import AgentResult, State
from ._filewatch import actor_listener
from ._journal import Journal, ThreadMark, open_journal
from ._loop import BreakpointReached, run_loop, unanswered_calls
from ._restored import BREAKPOINT
from ._spec import AgentSpec, RunInput
from ._threads import last_turn, next_step

__all__ = ["Session", "child_session", "execute_root"]


@dataclass(slots=True, kw_only=True, eq=False)
class Session:
    """One actor's run, set up.

    Attributes:
        spec: The agent it runs.
        state: The actor's state, listened to.
        run: The run's context.
        resumed: Whether the state was rebuilt from the thread's saved records.
    """

    spec: AgentSpec
    state: State
    run: RunContext
    resumed: bool = False

    def close(self) -> None:
        """Stop listening to the state (the run is over)."""
        self.state.listener = None


def _new_run(
    spec: AgentSpec,
    state: State,
    *,
    path: str,
    run_id: str,
    tree: TreeContext,
    emit: Callable[[Event], None] | None,
    context: object,
    parent: RunContext | None = None,
    slot: TreeSlot | None = None,
    budget: BudgetLedger | None = None,
) -> RunContext:
    backend = spec.backend
    return RunContext(
        path=path,
        run_id=run_id,
        thread_id=tree.thread_id,
        agent_name=spec.name,
        depth=0 if parent is None else parent.depth + 1,
        backend=None if backend is None else backend.bind(state, name=spec.name),
        store=spec.store if spec.store is not None or parent is None else parent.store,
        emit=emit,
        context=context,
        parent=parent,
        tree=tree,
        # The spec's own mapping (a collection of the names): no object per run.
        tool_names=spec.tools,
        slot=slot,
        budget=budget,
        system_prompt=spec.system_prompt,
    )


def _open(spec: AgentSpec, state: State, run: RunContext, *, restore: bool) -> Session:
    """Rebuild the actor's state from the thread's records if asked, then listen to it."""
    resumed = False
    restored = run.tree.restored
    if restore and restored is not None and restored.has(run.path):
        # Before any listener, so nothing is recorded twice.
        run.resumed = restored.replay(run.path, state)
        resumed = True
    state.listener = actor_listener(run, state)
    return Session(spec=spec, state=state, run=run, resumed=resumed)


def child_session(
    spec: AgentSpec,
    *,
    parent: RunContext,
    path: str,
    files: Mapping[str, FileRecord],
    slot: TreeSlot | None,
    budget: Budget | None = None,
) -> Session:
    """Set up a subagent's run: fresh state on a copy-on-write view of ``files``.

    A child that was working when its tree stopped continues from its records.
    With a ``budget`` of its own, its calls draw on that and on every budget
    above it; without, on its parent's.
    """
    state = State(spec.channels)
    state.files.update(files)  # copy-on-write: records are immutable
    run = _new_run(
        spec,
        state,
        path=path,
        run_id=new_id(),
        tree=parent.tree,
        emit=parent.emit,
        context=parent.context,
        parent=parent,
        slot=slot,
        budget=parent.budget if budget is None else BudgetLedger(budget, parent=parent.budget),
    )
    return _open(spec, state, run, restore=True)


async def execute_root(
    spec: AgentSpec,
    state: State | None,
    run_input: RunInput,
    *,
    run_id: str,
    thread_id: str | None,
    emit: Callable[[Event], None] | None,
    known: ThreadMark | None = None,
    pacer: Pacer | None = None,
    opened: Callable[[int], None] | None = None,
    spent: Callable[[Usage | None, BudgetReport | None], None] | None = None,
    background: object = None,
    keeps_background: bool = False,
) -> tuple[AgentResult, State, ThreadMark | None]:
    """One top-level run on a thread actor's state (None: a new actor).

    Args:
        known: Where the thread stood (head and origin) when the actor's last
            run ended, None when unknown. With a checkpointer, a kept ``state``
            whose mark differs from the lease's is stale (someone else wrote the
            thread, deleted it, rolled it back) and the thread is read again.
        pacer: Paces the steps of the run's whole tree (its runtime's).
        opened: Called with the thread's head once the run holds the thread's
            lease (before it writes anything): where undoing the run goes back to.
        spent: Called with the tree's usage and budget report as the run
            ends, however it ends (a failed or cancelled run has no result
            that says what it spent).
        background: The thread actor's background subagents.
        keeps_background: Whether they may outlive the run (see TreeContext).

    Returns:
        The run's result (the state as a dict, ``usage``, ``budget``, and
        ``__interrupt__`` when it stopped for human decisions), the actor's
        state, and where the thread stands after the run (None without a
        checkpointer, or when unknown).
    """
    ledger = None if run_input.budget is None else BudgetLedger(run_input.budget)
    tree = TreeContext(
        thread_id=thread_id,
        max_steps=run_input.max_steps,
        budget=ledger,
        pacer=pacer,
        identity=run_input.identity,
        background=background,
        keeps_background=keeps_background,
        stateless=run_input.stateless,
    )
    failure: Exception | None = None
    interrupted: list[ActionRequest] = []
    journal: Journal | None = None
    if state is None:
        known = None  # nothing in memory: whatever the thread holds is news
    async with AsyncExitStack() as stack:
        try:
            if spec.checkpointer is not None:
                journal = await stack.enter_async_context(
                    open_journal(
                        spec.checkpointer,
                        thread_id or "",
                        restore=run_input.resuming,
                        known=known,
                    )
                )
                if opened is not None:
                    opened(journal.head_at_open)
                if journal.mark_at_open != known:
                    state = None  # stale or never loaded: the journal read the thread
                tree.journal = journal
                tree.restored = journal.restored
            fresh = state is None
            if state is None:
                state = State(spec.channels)
            run = _new_run(
                spec,
                state,
                path=spec.name,
                run_id=run_id,
                tree=tree,
                emit=emit,
                context=run_input.context,
                budget=ledger,
            )
            if spent is not None:
                stack.callback(_report_spent, spent, run, ledger)
            session = _open(spec, state, run, restore=fresh)
            stack.callback(session.close)
            runs, passing = _has_run(session, run_input, journal)
            if not runs:
                return _result(state, run, []), state, _head(journal)
            breakpoints = run_input.breakpoints
            interrupted = await _execute(
                session,
                run_input.values,
                spec.breakpoints if breakpoints is None else breakpoints,
                continued=passing,
                start=run_input.goto,
            )
        except Exception as exc:
            # Raised outside the journal's task group below, so the caller gets
            # this exception itself, not an ExceptionGroup around it.
            failure = exc
    if failure is not None:
        raise failure
    assert state is not None  # every path without a failure set it
    return _result(state, run, interrupted), state, _head(journal)


def _has_run(session: Session, run_input: RunInput, journal: Journal | None) -> tuple[bool, bool]:
    """Take the run's decisions, its ``goto`` or its continuation.

    An update alone, or nothing to continue on a thread that finished, runs
    nothing (its values applied: a ``Command``'s update, as LangGraph's); the
    caller gets the thread's state.

    Returns:
        Whether it runs the loop, and whether it goes past the first breakpoint
        it reaches: only a run that continues a stop (the thread stood at a
        breakpoint, or it answers an approval). A run continued after a crash
        stops at the breakpoints it had not reached.

    Raises:
        InputError: Decisions for no pending request, a ``goto`` the thread
            cannot take, or a run with nothing to answer.
    """
    run, state = session.run, session.state
    thread_id = run.thread_id
    if run_input.update_only:
        state.apply(run_input.values)
        return False, False
    stopped = _past_breakpoint(run)
    if run_input.resume is not None and not stopped:
        _take_decisions(run, state, run_input.resume)
        return True, True
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
        return False, False
    return True, stopped


def _report_spent(
    spent: Callable[[Usage | None, BudgetReport | None], None],
    run: RunContext,
    ledger: BudgetLedger | None,
) -> None:
    # Its subagents have ended (and added theirs) by the time the stack unwinds.
    spent(run.usage, None if ledger is None else ledger.report())


def _head(journal: Journal | None) -> ThreadMark | None:
    return None if journal is None else journal.mark


def _result(state: State, run: RunContext, interrupted: list[ActionRequest]) -> AgentResult:
    result: AgentResult = AgentResult(state.to_dict())
    result["usage"] = run.usage
    ledger = run.tree.budget
    result["budget"] = None if ledger is None else ledger.report()
    if interrupted:
        result["__interrupt__"] = interrupt_view([r.to_dict() for r in interrupted])
    return result


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


async def _execute(
    session: Session,
    values: Mapping[str, object],
    breakpoints: Breakpoints,
    *,
    continued: bool,
    start: str | None = None,
) -> list[ActionRequest]:
    """Apply the input and run the loop; return the requests it stopped for, if any.

    A stop at a breakpoint is recorded (so the thread shows it, and the run that
    continues it goes past it) and returns no request.
    """
    run, state = session.run, session.state
    emit = run.emit
    if emit is not None:
        emit(RunStarted(path=run.path, run_id=run.run_id, thread_id=run.thread_id))
    try:
        if values:
            state.apply(values)
        # The run's sandbox key for all of it, subagents included: middleware
        # reading files outside a tool call (memory, skills, large results
        # moved to a file) reaches a per-thread sandbox's workspace too.
        with sandbox_scope(SandboxKey.for_run(run.thread_id, run.run_id, run.identity)):
            await run_loop(
                session.spec,
                state,
                run,
                breakpoints=breakpoints,
                continued=continued,
                start=start,
            )
    except BreakpointReached as exc:
        if run.tree.stateless:
            raise InterruptNeedsThread(
                _NEEDS_THREAD.format(tools=f"a breakpoint ({exc})")
            ) from None
        journal = run.journal
        if journal is not None:
            journal.record(run.path, run.step, BREAKPOINT, {"ran": exc.ran, "next": exc.next})
        if emit is not None:
            emit(Interrupted(path=run.path, run_id=run.run_id, requests=[]))
    except BudgetExceeded as exc:
        # The top of the tree: the run ends here, cleanly, saying why.
        state.add_message(
            AssistantMessage(content=f"Stopped: {exc}.", stop_reason="budget_exhausted")
        )
    except Interrupt as exc:
        if run.tree.stateless:
            raise InterruptNeedsThread(_NEEDS_THREAD.format(tools=_tools_of(exc))) from None
        requests = [r.to_dict() for r in exc.requests]
        journal = run.journal
        if journal is not None:
            journal.record(run.path, run.step, "interrupt", {"requests": [*requests]})
        if emit is not None:
            emit(Interrupted(path=run.path, run_id=run.run_id, requests=requests))
        return exc.requests
    return []


_NEEDS_THREAD = (
    "the run stopped for a human's decision on {tools}, but it is a stateless run: its "
    "thread is thrown away when it ends, so nothing would be kept to continue from. "
    "Run it on a thread (the SDK's threads.create(), then runs on that thread_id; "
    "RemoteGraph with config={{'configurable': {{'thread_id': ...}}}})"
)


def _tools_of(exc: Interrupt) -> str:
    names = sorted({r.tool for r in exc.requests})
    return ", ".join(names) if names else "a tool call"

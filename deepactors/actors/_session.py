"""Sessions: how an actor's run is set up, for thread actors and child actors alike.

This is the one place that builds a :class:`~deepactors.context.RunContext`,
binds the backend to the actor's state, opens or restores the journal, and
attaches the state listeners (events, checkpoints). A thread actor runs a
top-level run with :func:`execute_root`; a child actor opens its run with
:func:`child_session`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass

from .._core.pacing import Pacer
from ..backends import SandboxKey, sandbox_scope
from ..budget import Budget, BudgetLedger, BudgetReport
from ..context import RunContext, TreeContext, TreeSlot
from ..errors import BudgetExceeded, InterruptNeedsThread
from ..events import Event, Interrupted, RunStarted
from ..filediff import FileRecord
from ..interrupts import ActionRequest, Interrupt, interrupt_view
from ..limits import Breakpoints
from ..messages import AssistantMessage, Usage, new_id
from ..state import AgentResult, State
from ._filewatch import actor_listener
from ._journal import Journal, ThreadMark, open_journal
from ._loop import BreakpointReached, run_loop
from ._restored import BREAKPOINT
from ._run_input import take_input
from ._spec import AgentSpec, RunInput

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
                journal = await _open_thread(stack, spec, tree, run_input, known, opened)
                if journal.mark_at_open != known:
                    state = None  # stale or never loaded: the journal read the thread
            session = _root_session(stack, spec, state, tree, run_input, run_id, emit, spent)
            state, run = session.state, session.run
            taken = take_input(run, state, run_input, journal)
            if not taken.runs:
                return _result(state, run, []), state, _head(journal)
            breakpoints = run_input.breakpoints
            interrupted = await _execute(
                session,
                run_input.values,
                spec.breakpoints if breakpoints is None else breakpoints,
                continued=taken.continued,
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


def _root_session(
    stack: AsyncExitStack,
    spec: AgentSpec,
    state: State | None,
    tree: TreeContext,
    run_input: RunInput,
    run_id: str,
    emit: Callable[[Event], None] | None,
    spent: Callable[[Usage | None, BudgetReport | None], None] | None,
) -> Session:
    """Set up the top-level run on ``state`` (None: fresh, rebuilt from the thread's
    records if it has any); what it listens to stops with ``stack``."""
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
        budget=tree.budget,
    )
    if spent is not None:
        stack.callback(_report_spent, spent, run, tree.budget)
    session = _open(spec, state, run, restore=fresh)
    stack.callback(session.close)
    return session


async def _open_thread(
    stack: AsyncExitStack,
    spec: AgentSpec,
    tree: TreeContext,
    run_input: RunInput,
    known: ThreadMark | None,
    opened: Callable[[int], None] | None,
) -> Journal:
    """Take the thread's lease and open its journal for the run (closed with ``stack``).

    The tree gets the journal and what it read of the thread's records; ``opened``
    hears the thread's head before the run writes anything.
    """
    assert spec.checkpointer is not None
    journal = await stack.enter_async_context(
        open_journal(
            spec.checkpointer,
            tree.thread_id or "",
            restore=run_input.resuming,
            known=known,
        )
    )
    if opened is not None:
        opened(journal.head_at_open)
    tree.journal = journal
    tree.restored = journal.restored
    return journal


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

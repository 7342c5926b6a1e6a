"""State listeners of an actor: change events (files, plan) and the journal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from ..context import RunContext
from ..events import FileChanged, StateUpdated, TodosUpdated, wants_detail
from ..state import Applied, FileRecord, State

__all__ = ["actor_listener", "state_events"]

Change = Literal["created", "modified", "deleted"]


class _StateEvents:
    """Emits an event per file change and per plan change (see :func:`state_events`).

    An object, not a closure: one object per actor instead of a function, its
    cells and their tuple, for as long as the actor runs.
    """

    __slots__ = ("run", "state")

    def __init__(self, run: RunContext, state: State) -> None:
        self.run = run
        self.state = state

    def __call__(self, applied: Applied) -> None:
        update = applied.update
        run = self.run
        emit = run.emit
        assert emit is not None
        emit(
            StateUpdated(
                path=run.path, run_id=run.run_id, update=update, values=self.state.to_dict()
            )
        )
        if "todos" in update:
            emit(TodosUpdated(path=run.path, run_id=run.run_id, todos=self.state["todos"]))
        files = update.get("files")
        # Resolved by the files channel: paths to records (None: deleted).
        if not files or not isinstance(files, Mapping):
            return
        created: set[str] = set()
        if applied.merge is not None:
            # A subagent's merged diff: a conflict copy, or a path the child made.
            for outcome in applied.merge.outcomes:
                if outcome.saved_as is not None:
                    created.add(outcome.saved_as)
        for path, record in files.items():
            change: Change
            if record is None:
                change = "deleted"
            elif path in created or (isinstance(record, FileRecord) and record.version == 1):
                change = "created"
            else:
                change = "modified"
            emit(FileChanged(path=run.path, run_id=run.run_id, file_path=path, change=change))


def state_events(run: RunContext, state: State) -> Callable[[Applied], None]:
    """A state listener that emits an event per file change and per plan change.

    Whoever changed the state (a tool, a hook, a subagent's merge), listeners see
    it here, once, after the change is applied.
    """
    assert run.emit is not None
    return _StateEvents(run, state)


class _Both:
    __slots__ = ("listeners",)

    def __init__(self, *listeners: Callable[[Applied], None]) -> None:
        self.listeners = listeners

    def __call__(self, applied: Applied) -> None:
        for listener in self.listeners:
            listener(applied)


class _Step:
    """The run's current step, read when a record is made (instead of a lambda)."""

    __slots__ = ("run",)

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def __call__(self) -> int:
        return self.run.step


def actor_listener(run: RunContext, state: State) -> Callable[[Applied], None] | None:
    """The state listener of an actor: events and the journal, whichever apply.

    The listener refers to the state that holds it (a cycle), until the actor's
    session closes and drops it, so that reference counting frees both.
    """
    emit = run.emit
    events = state_events(run, state) if emit is not None and wants_detail(emit) else None
    journal = run.journal
    recorder = journal.listener(run.path, state, _Step(run)) if journal is not None else None
    if events is not None and recorder is not None:
        return _Both(events, recorder)
    return events or recorder

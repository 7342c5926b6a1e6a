"""State listeners of an actor: change events (files, plan) and the journal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..context import RunContext
from ..events import FileChanged, StateUpdated, TodosUpdated
from ..state import Applied, FileRecord, State

__all__ = ["actor_listener", "state_events"]

Change = Literal["created", "modified", "deleted"]


def state_events(run: RunContext, state: State) -> Callable[[Applied], None]:
    """A state listener that emits an event per file change and per plan change.

    Whoever changed the state (a tool, a hook, a subagent's merge), listeners see
    it here, once, after the change is applied.
    """
    emit = run.emit
    assert emit is not None

    def listener(applied: Applied) -> None:
        update = applied.update
        emit(StateUpdated(path=run.path, run_id=run.run_id, update=update, values=state.to_dict()))
        if "todos" in update:
            emit(TodosUpdated(path=run.path, run_id=run.run_id, todos=state["todos"]))
        files = update.get("files")
        if not files:
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

    return listener


def actor_listener(run: RunContext, state: State) -> Callable[[Applied], None] | None:
    """The state listener of an actor: events and the journal, whichever apply."""
    listeners: list[Callable[[Applied], None]] = []
    if run.emit is not None:
        listeners.append(state_events(run, state))
    journal = run.journal
    if journal is not None:
        listeners.append(journal.listener(run.path, state, lambda: run.step))
    if not listeners:
        return None
    if len(listeners) == 1:
        return listeners[0]

    def both(applied: Applied) -> None:
        for listener in listeners:
            listener(applied)

    return both

"""State listeners of an actor: change events (files, plan) and the journal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..context import RunContext
from ..events import FileChanged, TodosUpdated
from ..filediff import FileDiff
from ..state import FileRecord, State

__all__ = ["actor_listener", "state_events"]


def state_events(run: RunContext, state: State) -> Callable[[Mapping[str, Any]], None]:
    """A state listener that emits an event per file change and per plan change.

    Whoever changed the state (a tool, a hook, a subagent's merge), listeners see
    it here, once, after the change is applied.
    """
    emit = run.emit
    assert emit is not None

    def listener(update: Mapping[str, Any]) -> None:
        if "todos" in update:
            emit(TodosUpdated(path=run.path, run_id=run.run_id, todos=state["todos"]))
        files = update.get("files")
        if isinstance(files, FileDiff):
            # A subagent's merged diff: report where each change landed.
            for outcome in files.outcomes:
                if outcome.how in ("applied", "merged", "conflict"):
                    landed = outcome.saved_as or outcome.path
                    kind: Literal["created", "modified", "deleted"]
                    if landed not in state.files:
                        kind = "deleted"
                    elif outcome.saved_as or files.changes[outcome.path].base is None:
                        kind = "created"
                    else:
                        kind = "modified"
                    emit(
                        FileChanged(path=run.path, run_id=run.run_id, file_path=landed, change=kind)
                    )
        elif files:
            for path, record in files.items():
                change: Literal["created", "modified", "deleted"]
                if record is None:
                    change = "deleted"
                elif isinstance(record, FileRecord) and record.version > 1:
                    change = "modified"
                else:
                    change = "created"
                emit(FileChanged(path=run.path, run_id=run.run_id, file_path=path, change=change))

    return listener


def actor_listener(run: RunContext, state: State) -> Callable[[Mapping[str, Any]], None] | None:
    """The state listener of an actor: events and the journal, whichever apply."""
    listeners = []
    if run.emit is not None:
        listeners.append(state_events(run, state))
    if run.journal is not None:
        listeners.append(run.journal.listener(run.path, state, lambda: run.step))
    if not listeners:
        return None
    if len(listeners) == 1:
        return listeners[0]

    def both(update: Mapping[str, Any]) -> None:
        for listener in listeners:
            listener(update)

    return both

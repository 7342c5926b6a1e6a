"""Turns ``files`` updates of a state into :class:`~deepactors.events.FileChanged` events."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..context import RunContext
from ..events import FileChanged
from ..filediff import FileDiff
from ..state import FileRecord, State

__all__ = ["file_events"]


def file_events(run: RunContext, state: State) -> Callable[[Mapping[str, Any]], None]:
    """A state listener that emits an event per file change (only when someone listens)."""
    emit = run.emit
    assert emit is not None

    def files_now() -> Mapping[str, FileRecord]:
        return state.files

    def listener(update: Mapping[str, Any]) -> None:
        files = update.get("files")
        if isinstance(files, FileDiff):
            # A subagent's merged diff: report where each change landed.
            for outcome in files.outcomes:
                if outcome.how in ("applied", "merged", "conflict"):
                    landed = outcome.saved_as or outcome.path
                    kind: Literal["created", "modified", "deleted"]
                    if landed not in files_now():
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
    """The state listener of an actor: file events and the journal, whichever apply."""
    listeners = []
    if run.emit is not None:
        listeners.append(file_events(run, state))
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

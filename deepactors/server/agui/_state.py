"""The thread's todos and files as AG-UI state, for one run's stream.

The first state the run reports goes out whole (``STATE_SNAPSHOT``, in
LangGraph's shapes, as ``/threads/{id}/state`` gives them); every later change
of the thread's own todos and files as a JSON Patch (``STATE_DELTA``), written
against the files the client has been told of, so a file is added once,
replaced after, and removed only if the client has it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...events import StateUpdated
from ...langchain.views import values_to_lc

__all__ = ["StatePatches"]


@dataclass(slots=True)
class StatePatches:
    """What the client has been told of the state: whether it has a snapshot, and
    which files it has (see the module docstring)."""

    _files: set[str] = field(default_factory=set)
    _snapshot_sent: bool = False

    def events(self, event: StateUpdated) -> list[dict[str, object]]:
        """``STATE_SNAPSHOT`` for the run's first state, then ``STATE_DELTA`` per
        change of todos or files (none for a change of neither)."""
        if not self._snapshot_sent:
            self._snapshot_sent = True
            values = event.values
            snapshot = values_to_lc(
                {"todos": values.get("todos", []), "files": values.get("files", {})}
            )
            self._files = set(snapshot["files"])
            return [{"type": "STATE_SNAPSHOT", "snapshot": snapshot}]
        update = event.update
        patch: list[dict[str, object]] = []
        if "todos" in update:
            todos = values_to_lc({"todos": update["todos"]})["todos"]
            patch.append({"op": "replace", "path": "/todos", "value": todos})
        if "files" in update:
            files = values_to_lc({"files": update["files"]})["files"]
            for name, data in files.items():
                pointer = "/files/" + name.replace("~", "~0").replace("/", "~1")
                if data is None:
                    if name in self._files:
                        self._files.discard(name)
                        patch.append({"op": "remove", "path": pointer})
                    continue
                op = "replace" if name in self._files else "add"
                self._files.add(name)
                patch.append({"op": op, "path": pointer, "value": data})
        return [{"type": "STATE_DELTA", "delta": patch}] if patch else []

"""A placed child's checkpoints: kept in its parent's thread, as a local child's are.

When the parent's run saves its thread (a checkpointer), a child on a worker
records every state change and finished tool call through a
:class:`ChildJournal`: each record is sent to the parent (:class:`~._wire.Record`),
whose journal stores it under the child's actor path with the rest of the
tree's, and the child's ``sync`` before each model call waits for the parent's
journal to have stored everything so far (:class:`~._wire.Sync`). So the
thread holds the placed child's work exactly as it holds a local child's.

When a run continues such a thread (after an interrupt, or a crash), the
parent rebuilds the child's state from those records with the child's own
channels (:func:`restored_view`: the updates replayed, the results of its
unfinished step, the calls it waits on a human for) and sends it with the
child's start; on the worker :class:`RestoredRecords` replays it into the
child's fresh state, and the child goes on from where it stopped: what it
finished is not done again. (A subagent of the placed child, on the same
worker, starts over.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio

from ..actors import AgentSpec
from ..context import RunContext, ToolResult
from ..errors import CheckpointError
from ..filediff import FileRecord
from ..interrupts import ActionRequest
from ..messages import ToolMessage
from ..state import Applied, State
from ._wire import Record, Report, Restored, Sync

__all__ = ["ChildJournal", "RestoredRecords", "restored_view"]


class ChildJournal:
    """A placed child's journal on its worker: every record goes to the parent's.

    The records are encoded here, in the framing of the runtime's own journal
    (``actors._codec``: an update's channels each by its channel's encoder; a
    tool result as its message and update), so the parent stores them as they
    are.

    Args:
        cid: The child's number on its link.
        send: Sends a report to the parent (batched).
        send_now: Sends a report someone waits for.
    """

    __slots__ = ("_cid", "_error", "_send", "_send_now", "_synced", "_ticket", "_waiting")

    def __init__(
        self, cid: int, send: Callable[[Report], None], send_now: Callable[[Report], None]
    ) -> None:
        self._cid = cid
        self._send = send
        self._send_now = send_now
        self._ticket = 0
        self._synced = 0
        self._error: str | None = None
        self._waiting: list[tuple[int, anyio.Event]] = []

    def record(self, path: str, step: int, kind: str, data: dict[str, Any]) -> int:
        """Send a record to the parent's journal; return its ticket."""
        self._ticket += 1
        self._send(Record(self._cid, path, step, kind, data))
        return self._ticket

    def record_tool_result(
        self,
        path: str,
        step: int,
        message: ToolMessage,
        update: Mapping[str, Any] | None,
        state: State,
    ) -> None:
        """Record a finished tool call, so a resumed step does not run it again."""
        data: dict[str, Any] = {"message": message.model_dump(mode="json")}
        if update:
            data["update"] = _encoded(update, state)
        self.record(path, step, "tool_result", data)

    def listener(
        self, path: str, state: State, step: Callable[[], int]
    ) -> Callable[[Applied], None]:
        """A state listener recording every update the actor at ``path`` applies."""

        def on_update(applied: Applied) -> None:
            self.record(path, step(), "update", _encoded(applied.update, state))

        return on_update

    async def sync(self) -> None:
        """Wait until the parent's journal has stored everything recorded so far.

        Raises:
            CheckpointError: The parent's checkpointer failed.
        """
        target = self._ticket
        if self._synced < target:
            stored = anyio.Event()
            self._waiting.append((target, stored))
            self._send_now(Sync(self._cid, target))
            await stored.wait()
        if self._error is not None:
            raise CheckpointError(self._error)

    def synced(self, ticket: int, error: str | None) -> None:
        """The parent's journal stored the records up to ``ticket`` (or failed)."""
        self._synced = max(self._synced, ticket)
        if error is not None:
            self._error = error
        still = []
        for target, stored in self._waiting:
            if target <= self._synced or error is not None:
                stored.set()
            else:
                still.append((target, stored))
        self._waiting = still


def _encoded(update: Mapping[str, Any], state: State) -> dict[str, Any]:
    channels = state.channels
    return {name: channels[name].encode(value) for name, value in update.items()}


class RestoredRecords:
    """A placed child's saved work, as its worker's runtime reads it (``ThreadRecords``).

    Args:
        path: The child's actor path (its subagents' have no records here).
        restored: What the parent rebuilt from the thread's records.
    """

    __slots__ = ("_path", "_restored")

    def __init__(self, path: str, restored: Restored) -> None:
        self._path = path
        self._restored = restored

    def has(self, path: str) -> bool:
        """Whether the actor at ``path`` left anything to resume from."""
        return path == self._path

    def pending_interrupt(self, path: str) -> list[ActionRequest] | None:
        """The requests the child stopped for, unless already answered."""
        pending = self._restored.pending
        return list(pending) if path == self._path and pending is not None else None

    def pending_breakpoint(self, path: str) -> tuple[str | None, str | None] | None:
        """None: breakpoints stop top-level runs only, never a child on a worker."""
        return None

    def replay(self, path: str, state: State) -> dict[str, ToolResult]:
        """Rebuild the child's state; return the results of its unfinished step."""
        if path != self._path:
            return {}
        for update in self._restored.updates:
            state.apply(update)
        return dict(self._restored.resumed)


def restored_view(
    parent: RunContext, path: str, spec: AgentSpec, files: Mapping[str, FileRecord]
) -> Restored | None:
    """The child's saved work in the parent's thread, rebuilt for its worker; None if none.

    Replayed as the child's own session would (onto the same snapshot of the
    parent's files, with its own channels); the updates are kept as they
    were applied, each complete, so the worker applies them as they are.
    """
    records = parent.tree.restored
    if records is None or not records.has(path):
        return None
    state = State(spec.channels)
    state.files.update(files)
    updates: list[Mapping[str, Any]] = []
    state.listener = lambda applied: updates.append(applied.update)
    resumed = records.replay(path, state)
    pending = records.pending_interrupt(path)
    return Restored(
        updates=tuple(updates),
        resumed=resumed,
        pending=None if pending is None else tuple(pending),
    )

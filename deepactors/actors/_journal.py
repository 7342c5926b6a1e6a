"""The journal: every actor's state changes, written behind the run to a checkpointer.

One journal serves a whole actor tree (the top-level run and every subagent
under it); each record carries its actor's path. A writer task takes whatever
has piled up and stores it in one transaction, so records of many actors that
change at once (a fan-out finishing) share one commit: group commit.

Writes are behind the run, not in its way, but an actor never calls its model
before everything it recorded is durable (:meth:`Journal.sync`, which stores
what is queued itself when the writer is idle: one hop and one commit per turn):
a crash can lose at most the step in progress, and the results of tool calls
that finished in that step are recorded one by one as they finish (each wakes
the writer), so a resumed step does not run them again. A state change alone
does not wake the writer: it waits for the next of those, so that a turn's
changes share one commit.

A journal holds its thread's lease (:meth:`Checkpointer.lease
<deepactors.persistence.Checkpointer.lease>`) from before it reads the thread
until its last record is stored: runs of one thread, in this process or
another, take turns and never interleave their records.

Reading a thread back, and checking what is read, is ``_restored``'s (``Restored``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TypeAlias

import anyio

from .._core.jsonvalue import JSONObject
from .._core.loops import parking_lot
from ..errors import CheckpointError
from ..messages import ToolMessage
from ..persistence import (
    Checkpointer,
    CheckpointWrite,
    EncodedWrite,
    encode_writes,
    encoded_put,
)
from ..state import Applied, State
from ._codec import (
    encode_tool_result,
    encode_update,
    encode_update_text,
)
from ._restored import Restored

__all__ = ["Journal", "ThreadMark", "open_journal"]


ThreadMark: TypeAlias = tuple[int, float | None]
"""Where a thread stands: its head (the newest record's ``seq``) and its origin
(when its first record was stored; None: it has none). A thread deleted and
written anew may come back to a head it had; with the origin it is told apart."""


class Journal:
    """Collects records and hands them to the writer task. See the module docstring."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        thread_id: str,
        restored: Restored | None,
        head_at_open: int = 0,
        origin: float | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.thread_id = thread_id
        self.restored = restored
        self.head_at_open = head_at_open
        self.origin = origin
        self._stored = 0
        # A list, and parking lots (a future per wait, not an event per wake):
        # a record costs an append, not a memory stream's send (this runs for
        # every state change), and waking the writer costs a future.
        self._queue: list[tuple[int, CheckpointWrite | EncodedWrite]] = []
        # A checkpointer of this package takes a state change encoded as it
        # happens (see _codec.encode_update_text); one of a user's, dicts.
        self._put_encoded = encoded_put(checkpointer)
        self._closed = False
        self._writer = parking_lot()  # the writer waits here for records
        self._waiting = False  # the writer is parked
        self._storing = False  # a batch is being stored (by the writer or a sync)
        self._ticket = 0
        self._committed = 0
        self._commits = parking_lot()  # syncs wait here while another stores
        self._error: BaseException | None = None

    @property
    def head(self) -> int:
        """The ``seq`` of the thread's newest record, this run's stored ones included.

        Exact while the journal holds the thread's lease (nobody else writes):
        an actor that keeps the thread's state in memory between runs remembers
        it, and reloads the state when the next run's :attr:`head_at_open`
        differs (another process ran the thread meanwhile).
        """
        return self.head_at_open + self._stored

    @property
    def mark_at_open(self) -> ThreadMark:
        """Where the thread stood when the lease was taken (see :data:`ThreadMark`)."""
        return self.head_at_open, self.origin

    @property
    def mark(self) -> ThreadMark | None:
        """Where the thread stands now (see :data:`ThreadMark`); None when unknown.

        Unknown when this run wrote the thread's first records: when they were
        stored is the checkpointer's to say, and the next run reads the thread
        again to learn it.
        """
        head = self.head
        if self.origin is None and head:
            return None
        return head, self.origin

    def record(self, path: str, step: int, kind: str, data: JSONObject) -> int:
        """Queue a record, stored behind the run; return its ticket for :meth:`sync`."""
        ticket = self._append(path, step, kind, data)
        self._wake()
        return ticket

    def _append(self, path: str, step: int, kind: str, data: JSONObject) -> int:
        """Queue a record without waking the writer: the next sync, record or close stores it."""
        return self._enqueue(CheckpointWrite(path=path, step=step, kind=kind, data=data))

    def _enqueue(self, write: CheckpointWrite | EncodedWrite) -> int:
        """Queue a record as data, or already encoded (for a checkpointer that takes rows)."""
        if self._closed:
            raise anyio.ClosedResourceError(f"the journal of thread {self.thread_id!r} is closed")
        self._ticket += 1
        self._queue.append((self._ticket, write))
        return self._ticket

    def _wake(self) -> None:
        if self._waiting:
            self._waiting = False
            self._writer.unpark(count=1)

    def _close(self) -> None:
        """No more records: the writer stores what is queued, then ends."""
        self._closed = True
        self._wake()

    def _take(self) -> list[tuple[int, CheckpointWrite | EncodedWrite]]:
        batch, self._queue = self._queue, []
        return batch

    def record_tool_result(
        self,
        path: str,
        step: int,
        message: ToolMessage,
        update: Mapping[str, object] | None,
        state: State,
    ) -> None:
        """Record a finished tool call (before it is appended at the step's end)."""
        self.record(path, step, "tool_result", encode_tool_result(message, update, state))

    def listener(
        self, path: str, state: State, step: Callable[[], int]
    ) -> Callable[[Applied], None]:
        """A state listener that records every applied update of the actor at ``path``."""

        # A state change belongs to the step in progress: it is stored with the
        # next sync (before the actor's next model call), the next tool result
        # of a fan-out, or the run's end, whichever comes first, not by a writer
        # woken for it alone. A turn (its answer, a tool's I/O, its results)
        # is then one commit, not one for the answer and one for the rest.
        def on_update(applied: Applied) -> None:
            if self._put_encoded is not None:
                try:
                    text = encode_update_text(applied.update, state)
                except Exception:  # whatever it is, the general road below meets it again
                    pass  # queued as data below: the put fails with the encoder's own words
                else:
                    self._enqueue((path, step(), "update", text))
                    return
            self._append(path, step(), "update", encode_update(applied.update, state))

        return on_update

    async def sync(self) -> None:
        """Wait until everything recorded so far is stored.

        Raises:
            CheckpointError: The checkpointer failed; the run cannot promise durability.
        """
        target = self._ticket
        while self._committed < target:
            if self._error is not None:
                break
            if not self._storing and self._queue:
                # Nothing is being stored: the records are stored from here, in
                # this task (the writer would take them a loop turn later, then
                # wake this task again: two task switches per step for nothing).
                # Shielded as the writer is: what left the queue is stored.
                with anyio.CancelScope(shield=True):
                    await self._put(self._take())
                continue
            await self._commits.park()
        if self._error is not None:
            raise CheckpointError(
                f"could not save thread {self.thread_id!r}: {self._error}"
            ) from self._error

    async def _write(self) -> None:
        # Shielded for its whole life: a batch that left the queue is stored even
        # if the run is cancelled, and so is what is queued when the journal
        # closes (a timed-out run keeps its work). It ends once closed and drained.
        # One batch is stored at a time, here or by a sync (see above): the
        # log's order is the order the records were made.
        with anyio.CancelScope(shield=True):
            while True:
                if not self._storing:
                    batch = self._take()
                    if batch:
                        await self._put(batch)
                        continue
                    if self._closed:
                        return
                self._waiting = True
                await self._writer.park()

    async def _put(self, batch: list[tuple[int, CheckpointWrite | EncodedWrite]]) -> None:
        # After a failed batch nothing more is stored: the saved log stays a clean
        # prefix of what happened (a resume never sees a result without the call
        # that asked for it), and every later sync raises.
        self._storing = True
        try:
            if self._error is None:
                try:
                    await self._store(batch)
                except Exception as exc:
                    self._error = exc
                else:
                    self._stored += len(batch)
            self._committed = batch[-1][0]
        finally:
            self._storing = False
        if self._queue or self._closed:
            self._wake()  # what came meanwhile, or the end: the writer's (if it waits)
        commits = self._commits
        if commits:
            commits.unpark(count=len(commits))

    async def _store(self, batch: list[tuple[int, CheckpointWrite | EncodedWrite]]) -> None:
        put_encoded = self._put_encoded
        if put_encoded is None:
            # Only records as data are queued then: the filter drops nothing.
            records = [w for _, w in batch if isinstance(w, CheckpointWrite)]
            await self.checkpointer.put(self.thread_id, records)
            return
        # An encoding error fails the batch here, as the checkpointer's put would.
        rows = [encode_writes([w])[0] if isinstance(w, CheckpointWrite) else w for _, w in batch]
        await put_encoded(self.thread_id, rows)


@asynccontextmanager
async def open_journal(
    checkpointer: Checkpointer, thread_id: str, *, restore: bool, known: ThreadMark | None = None
) -> AsyncIterator[Journal]:
    """A journal for one top-level run, with its writer running in a task group.

    The thread's lease is taken first (waiting for another run of the thread,
    here or in another process, to finish: the wait counts against the caller's
    deadline), and given back once the last records are stored. The thread's
    records are read under the lease (:attr:`Journal.restored`) with
    ``restore``, or when the lease's head and origin are not ``known`` (where
    the thread stood as the caller's state in memory reflects it; None when it
    holds none). Leaving the
    block waits for the last records to be stored, even when the run was
    cancelled (a timed-out run's finished work is kept).

    Raises:
        ThreadBusy: The checkpointer refuses to wait for a busy thread.
        CheckpointCorrupt: ``restore`` found a damaged checkpoint.
        CheckpointError: The last records could not be stored.
    """
    async with checkpointer.lease(thread_id) as lease:
        restored = None
        if restore or (lease.head, lease.origin) != known:
            records = await checkpointer.read(thread_id)
            if records:
                restored = Restored(thread_id, records, source=checkpointer.location)
        journal = Journal(
            checkpointer, thread_id, restored, head_at_open=lease.head, origin=lease.origin
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(journal._write)
                try:
                    yield journal
                finally:
                    journal._close()  # the writer stores what is queued, then ends
        finally:
            # Should the writer have failed: store what it left, whatever happened.
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                rest = journal._take()
                if rest:
                    await journal._put(rest)
        # Reached only when the run itself ended without an exception: its last
        # records (the final answer, an interrupt) must be stored, or it did not end.
        if journal._error is not None or journal._committed < journal._ticket:
            why = journal._error or "timed out storing the last records"
            raise CheckpointError(f"could not save thread {thread_id!r}: {why}") from journal._error

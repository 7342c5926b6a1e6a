"""Checkpoints as LangGraph's clients name them: ids, the head, and forks.

A checkpoint id of this server is the ``seq`` of one of the thread's records
(as text), as ``/state`` and ``/history`` hand them out. A client that gives
one back, on a run or a state update, gets what LangGraph's server gives:

- no id, or the thread's head: the run goes on from the head (deep-agents-ui
  and Agent Chat UI send the head with every follow-up and every decision);
- an older checkpoint: the thread is forked there. Its handle rolls it back to
  that record (an order in the thread's mailbox, in turn with its runs), so
  the run starts from the state the checkpoint holds; the records after it stay
  in the log, and ``/history`` still lists them, as LangGraph lists the
  checkpoints of a thread's every branch, newest first;
- an id the thread never had: 404, naming the thread and the id.
"""

from __future__ import annotations

from typing import Protocol

from starlette.exceptions import HTTPException

from ..actors import Runtime, ThreadHandle
from ._records import AssistantRecord, RunRecord, ThreadRecord, public_id
from ._schemas import Checkpoint, RunCreate
from ._wire_json import CheckpointJSON

__all__ = [
    "Runs",
    "checkpoint_json",
    "checkpoint_seq",
    "fork_at",
    "requested_seq",
    "start_from",
    "superseded_history",
]


class Runs(Protocol):
    """What :func:`start_from` needs of the run manager (``_runs.RunManager``, which
    calls it: a protocol, not an import, so the two modules make no circle)."""

    runtime: Runtime

    async def refresh(self, thread: ThreadRecord) -> None: ...

    async def _make_room(
        self, thread: ThreadRecord, inflight: list[RunRecord], strategy: str
    ) -> None: ...


def checkpoint_seq(raw: object, field: str) -> int:
    """The record a checkpoint id names.

    Raises:
        HTTPException: 422, naming ``field``, when ``raw`` is no id of this server.
    """
    try:
        if not isinstance(raw, str | int | float):
            raise TypeError(raw)
        seq = int(raw)
    except (TypeError, ValueError):
        raise HTTPException(422, f"{field}: a checkpoint id of this server, not {raw!r}") from None
    if seq < 1:
        raise HTTPException(422, f"{field}: a checkpoint id of this server, not {raw!r}")
    return seq


def requested_seq(
    checkpoint: Checkpoint | None, checkpoint_id: str | None, where: str = ""
) -> int | None:
    """The record a request's ``checkpoint`` / ``checkpoint_id`` names (None: the head).

    Raises:
        HTTPException: 422 for an id that is not one of this server's, or a
            checkpoint of a subgraph (this server checkpoints the root only).
    """
    if checkpoint is not None and checkpoint.checkpoint_ns:
        raise HTTPException(
            422,
            f"{where}checkpoint.checkpoint_ns: only the root graph's checkpoints ('') "
            f"are served, not {checkpoint.checkpoint_ns!r}",
        )
    raw = checkpoint.checkpoint_id if checkpoint is not None else None
    if raw is not None and checkpoint_id is not None and raw != checkpoint_id:
        raise HTTPException(
            422, f"{where}checkpoint_id: {checkpoint_id!r} and checkpoint {raw!r} disagree"
        )
    raw = raw if raw is not None else checkpoint_id
    if raw is None:
        return None
    field = f"{where}checkpoint.checkpoint_id" if checkpoint else f"{where}checkpoint_id"
    return checkpoint_seq(raw, field)


async def fork_at(handle: ThreadHandle, seq: int) -> None:
    """Make record ``seq`` the thread's head: nothing if it is the head when its
    turn comes, else a rollback to it (the records after it stay readable).

    Raises:
        HTTPException: 404 when the thread has no record ``seq``.
    """
    records = await handle.history(superseded=True)
    if seq not in {r.seq for r in records}:
        name = public_id(handle.thread_id)
        raise HTTPException(404, f"thread {name!r} has no checkpoint {str(seq)!r}")
    # An order in the thread's mailbox, decided in its turn: behind the runs
    # queued before it, so what follows starts from ``seq`` whatever they did,
    # as a LangGraph run from a checkpoint does, however the timing falls.
    await handle.fork(seq)


async def start_from(
    manager: Runs, thread: ThreadRecord, assistant: AssistantRecord, body: RunCreate
) -> None:
    """Where a run on ``thread`` starts: its head, or the checkpoint ``body`` names.

    A fork waits for the runs ahead of it on the thread (``enqueue``), or makes
    room first as the run's multitask strategy says (``reject`` refuses it).

    Raises:
        HTTPException: 404 an unknown checkpoint, 409 a busy thread with
            ``reject``, 422 a checkpoint on a stateless run or a bad id.
    """
    seq = requested_seq(body.checkpoint, body.checkpoint_id)
    if seq is None:
        return
    if thread.temporary:
        raise HTTPException(422, "checkpoint: a stateless run has no checkpoint to start from")
    while (inflight := thread.inflight) and body.multitask_strategy != "enqueue":
        await manager._make_room(thread, inflight, body.multitask_strategy)
    await fork_at(manager.runtime.thread(assistant.agent, thread.thread_id), seq)
    thread.graph_id = assistant.graph_id
    await manager.refresh(thread)  # its values and interrupts as of the fork


def checkpoint_json(thread_id: str, seq: int | None) -> CheckpointJSON | None:
    """A checkpoint as LangGraph's server writes one (None for no record)."""
    if seq is None:
        return None
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": str(seq),
        "checkpoint_map": None,
    }


async def superseded_history(handle: ThreadHandle, path: str) -> list[tuple[int, int | None]]:
    """Every checkpoint of the thread's root actor, newest first, with its parent.

    Records a fork left behind are listed too, each with the parent it had on
    its own branch (the root's record that counted just before it).
    """
    seqs = [r.seq for r in await handle.history(path=path, superseded=True)]
    live = {r.seq for r in await handle.history(path=path)}
    out: list[tuple[int, int | None]] = []
    previous: int | None = None
    for seq in seqs:
        if seq in live:
            parent = previous
        else:
            before = await handle.history(path=path, upto_seq=seq - 1)
            parent = before[-1].seq if before else None
        out.append((seq, parent))
        if seq in live:
            previous = seq
    out.reverse()
    return out

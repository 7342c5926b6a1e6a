"""Compacting a thread's journal to its latest state (``keep_latest``).

A thread's history is its journal: every step's update, appended. A long-lived
thread (a chat kept for months, a cron's thread) grows without bound, and
LangGraph's ``threads.prune(strategy="keep_latest")`` and a thread TTL's
``keep_latest`` strategy drop all but the latest checkpoint. Here that is a
rewrite of the journal into what resuming the thread needs, and nothing else:

- one ``update`` record holding the top-level actor's whole state, as the
  records replayed build it;
- its newest ``interrupt``, ``resume`` and ``breakpoint`` records, in their
  order (they say whether the thread waits for an answer, ended a turn, or
  stopped at a breakpoint);
- the results of tool calls of an unfinished step (so a resumed step does not
  run them again), and, only while a step is unfinished (tool calls without
  results), the records of the subagents, as they were (a subagent of that
  step resumes from them).

The rewrite is checked before it is stored: replayed, it must build the same
state and leave the same things pending, or nothing is changed
(:class:`~deepactors.errors.InputError` says why). The thread actor does it in
its turn, under the thread's lease, and the checkpointer swaps the records in
one transaction (:class:`~deepactors.persistence.Rewritable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from .._core.jsonvalue import JSONObject
from ..errors import InputError
from ..interrupts import ActionRequest
from ..persistence import CheckpointRecord, CheckpointWrite, MemoryCheckpointer
from ..state import State
from ._codec import encode_update
from ._loop import unanswered_calls
from ._restored import BREAKPOINT, Restored

__all__ = ["compact"]

_Signature: TypeAlias = tuple[
    dict[str, object],
    list[str],
    list[ActionRequest] | None,
    tuple[str | None, str | None] | None,
    str | None,
]
"""A thread as :func:`_signature` sums it up: state, pending results, markers."""

_MARKERS = ("interrupt", "resume", BREAKPOINT)
"""Kinds of which the newest record of the top-level actor is kept."""


def _signature(restored: Restored, path: str, state: State) -> _Signature:
    """What must read back the same from the rewrite: state, pending results, markers."""
    pending = restored.replay(path, state)
    return (
        state.to_dict(),
        sorted(pending),
        restored.pending_interrupt(path),
        restored.pending_breakpoint(path),
        restored.ended_turn(path),
    )


def _write(record: CheckpointRecord) -> CheckpointWrite:
    return CheckpointWrite(path=record.path, step=record.step, kind=record.kind, data=record.data)


async def compact(
    thread_id: str, records: Sequence[CheckpointRecord], *, path: str, state: Callable[[], State]
) -> list[CheckpointWrite] | None:
    """The records that keep only the latest state of the thread (None: nothing to drop).

    Args:
        thread_id: The thread, for errors.
        records: All its records, in ``seq`` order.
        path: The top-level actor's path (the agent's name).
        state: Makes an empty state of the agent's channels.

    Raises:
        CheckpointCorrupt: A record cannot be read.
        InputError: The rewrite would not read back as the thread does.
    """
    restored = Restored(thread_id, records)
    if not restored.records:
        return None
    full = state()
    before = _signature(restored, path, full)
    pending = set(before[1])
    # Calls without results: a step to finish, whose subagents resume from their records.
    open_step = bool(unanswered_calls(full.messages)[1])
    own = restored.by_path.get(path, [])
    newest: dict[str, CheckpointRecord] = {}
    for record in own:
        if record.kind in _MARKERS:
            newest[record.kind] = record
    kept: list[CheckpointRecord] = []
    for record in restored.records:
        if record.path != path:
            if open_step:
                kept.append(record)
        elif record.kind in _MARKERS:
            if newest[record.kind] is record:
                kept.append(record)
        elif record.kind == "tool_result" and _call_id(record.data) in pending:
            kept.append(record)
    values = _as_update(full.to_dict(), full)
    step = own[-1].step if own else 0
    rewrite = [CheckpointWrite(path=path, step=step, kind="update", data=values)]
    rewrite += [_write(r) for r in kept]
    if len(rewrite) >= len(restored.records) and len(records) == len(restored.records):
        return None  # nothing would be dropped
    await _check(thread_id, rewrite, before, path=path, state=state)
    return rewrite


def _call_id(data: Mapping[str, object]) -> object:
    message = data.get("message")
    return message.get("tool_call_id") if isinstance(message, dict) else None


def _as_update(values: Mapping[str, object], state: State) -> JSONObject:
    """The state's values as one update of an empty state (channels at their default left out)."""
    channels = state.channels
    defaults = {name: channel.default() for name, channel in channels.items()}
    changed = {name: value for name, value in values.items() if value != defaults.get(name)}
    return encode_update(changed, state)


async def _check(
    thread_id: str,
    rewrite: Sequence[CheckpointWrite],
    before: _Signature,
    *,
    path: str,
    state: Callable[[], State],
) -> None:
    """Refuse a rewrite that would not read back as the thread reads now.

    Read back through a checkpointer, so the values cross the same JSON the
    stored ones will.
    """
    async with MemoryCheckpointer() as scratch:
        await scratch.put(thread_id, rewrite)
        again = await scratch.read(thread_id)
    after = _signature(Restored(thread_id, again), path, state())
    if after != before:
        raise InputError(
            f"thread {thread_id!r} cannot keep only its latest state: its state, replayed "
            "from one record, would not read back the same (a channel whose reducer does not "
            "take its whole value as an update); its history is kept whole"
        )

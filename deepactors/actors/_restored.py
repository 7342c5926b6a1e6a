"""A thread's records read back: what the journal wrote, checked, as a run resumes from it.

Reading back checks what it reads (:class:`Restored`): records numbered 1, 2,
3... with none missing, of the kinds written here, holding data that decodes.
Anything else is :class:`~deepactors.errors.CheckpointCorrupt` naming where the
records are kept, the thread and the record, without quoting what it holds:
a damaged checkpoint never silently resumes on a shorter history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from pydantic import ValidationError

from ..context import ToolResult
from ..errors import CheckpointCorrupt
from ..interrupts import ActionRequest
from ..messages import ToolMessage
from ..persistence import CheckpointRecord
from ..state import State
from ._codec import decode_tool_result, decode_update

__all__ = ["BREAKPOINT", "KINDS", "ROLLBACK", "Restored"]

ROLLBACK = "rollback"
"""The kind of a marker that takes the thread back: ``{"to": seq}``. The records
after ``seq`` and before the marker no longer count. The log stays append-only,
so a thread's head only grows: an actor that remembers the head its last run
left sees a rollback as news, as it sees any other write."""

BREAKPOINT = "breakpoint"
"""The kind of a record that says the run stopped at a breakpoint:
``{"ran": node | None, "next": node | None}`` (see :class:`~deepactors.limits.Breakpoints`).
A later ``resume`` record (the run that continued it) clears it."""

KINDS = frozenset({"update", "tool_result", "interrupt", "resume", BREAKPOINT, ROLLBACK})
"""The kinds of record a journal writes, and so the only ones it reads back."""


def _why(exc: BaseException) -> str:
    """What is wrong with a stored value, without quoting the value.

    pydantic's messages (and ``repr`` of the input) would quote the stored text
    (a user's message, a file's content): keep only the kinds of error.
    """
    cause = exc.__cause__ if isinstance(exc, CheckpointCorrupt) else exc
    if isinstance(cause, ValidationError):
        kinds = sorted({e["type"] for e in cause.errors(include_url=False, include_input=False)})
        return f"{cause.error_count()} invalid value(s): {', '.join(kinds)}"
    return type(cause).__name__ if cause is not None else "invalid"


_Link: TypeAlias = "tuple[CheckpointRecord, _Link] | None"
"""The records that count up to one point: the last, and a link to the rest."""


class Restored:
    """What a thread's checkpoint holds, indexed for the actors that resume from it.

    Args:
        thread_id: The thread.
        records: All its records, or all up to some ``seq``, in ``seq`` order.
        source: Where they were kept (:attr:`Checkpointer.location`), for errors.

    Attributes:
        records: The records that count, in ``seq`` order: rolled-back ones and
            the rollback markers left out.

    Raises:
        CheckpointCorrupt: A record is missing (the ``seq`` numbers are not 1, 2,
            3...), is of a kind no journal writes, or is a rollback marker that
            does not point back.
    """

    def __init__(
        self, thread_id: str, records: Sequence[CheckpointRecord], *, source: str = ""
    ) -> None:
        self.thread_id = thread_id
        self._source = f"{source}: " if source else ""
        self.by_path: dict[str, list[CheckpointRecord]] = defaultdict(list)
        rollbacks = False
        for expected, record in enumerate(records, 1):
            if record.seq != expected:
                raise CheckpointCorrupt(
                    f"{self._source}thread {thread_id!r}: record seq {expected} is missing "
                    f"(the records go on at seq {record.seq})"
                )
            if record.kind not in KINDS:
                raise CheckpointCorrupt(
                    f"{self._where(record)}: unknown kind {record.kind[:40]!r}; "
                    f"a journal writes {', '.join(sorted(KINDS))}"
                )
            rollbacks = rollbacks or record.kind == ROLLBACK
        live = self._live(records) if rollbacks else list(records)
        self.records = live
        for record in live:
            self.by_path[record.path].append(record)

    def _live(self, records: Sequence[CheckpointRecord]) -> list[CheckpointRecord]:
        """The records that count after the rollback markers among ``records``.

        A marker ``{"to": s}`` makes the thread what it was right after record
        ``s`` was stored, whatever happened since, earlier rollbacks included:
        each seq keeps the tail of the thread as it stood then (a chain of
        ``(record, previous)`` links, shared, so this is one pass).
        """
        tail: _Link = None
        at: list[_Link] = [None]  # at[s]: the tail right after record s (at[0]: empty)
        for record in records:
            if record.kind == ROLLBACK:
                to = record.data.get("to")
                if isinstance(to, bool) or not isinstance(to, int) or not 0 <= to < record.seq:
                    raise CheckpointCorrupt(f"{self._where(record)}: unreadable rollback marker")
                tail = at[to]
            else:
                tail = (record, tail)
            at.append(tail)
        live: list[CheckpointRecord] = []
        while tail is not None:
            record, tail = tail
            live.append(record)
        live.reverse()
        return live

    def _where(self, record: CheckpointRecord) -> str:
        thread, seq = self.thread_id, record.seq
        return f"{self._source}thread {thread!r}, actor {record.path!r}, record seq {seq}"

    def has(self, path: str) -> bool:
        """Whether the actor at ``path`` left anything to resume from."""
        return path in self.by_path

    def pending_interrupt(self, path: str) -> list[ActionRequest] | None:
        """The requests the actor at ``path`` stopped for, unless already answered.

        Raises:
            CheckpointCorrupt: The interrupt record cannot be read.
        """
        for record in reversed(self.by_path.get(path, ())):
            if record.kind == "resume":
                return None
            if record.kind == "interrupt":
                try:
                    return [ActionRequest.from_dict(r) for r in record.data["requests"]]
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise CheckpointCorrupt(
                        f"{self._where(record)}: unreadable interrupt ({_why(exc)})"
                    ) from None
        return None

    def pending_breakpoint(self, path: str) -> tuple[str | None, str | None] | None:
        """Where the actor at ``path`` stopped at a breakpoint, if no run continued it since.

        Returns:
            The node that ran before the stop and the one that would run next
            (either may be None), or None when the actor is not stopped at one.
        """
        for record in reversed(self.by_path.get(path, ())):
            if record.kind in ("resume", "interrupt"):
                return None
            if record.kind == BREAKPOINT:
                ran, next = record.data.get("ran"), record.data.get("next")
                return (
                    ran if isinstance(ran, str) else None,
                    next if isinstance(next, str) else None,
                )
        return None

    def ended_turn(self, path: str) -> str | None:
        """The turn whose pending calls the actor's newest resume ended (goto END).

        The id of the newest message that was not a tool result when the thread
        was resumed with ``END_PENDING``; None when its newest resume decided
        the calls instead, or it has none.
        """
        for record in reversed(self.by_path.get(path, ())):
            if record.kind == "resume":
                ended = record.data.get("ended")
                return ended if isinstance(ended, str) else None
        return None

    def replay(self, path: str, state: State) -> dict[str, ToolResult]:
        """Rebuild the actor's state; return the tool results of its unfinished step.

        Raises:
            CheckpointCorrupt: A record cannot be decoded; the message names the
                thread, the actor, the record and the channel, not the data.
        """
        results: dict[str, ToolResult] = {}
        for record in self.by_path.get(path, ()):
            where = self._where(record)
            if record.kind == "update":
                change = self._update(record.data, where, state)
                try:
                    state.apply(change)
                except ValueError as exc:
                    # A stored change that does not fit the state the records
                    # before it built (an append to a file that is not there).
                    raise CheckpointCorrupt(f"{where}: {exc}") from None
            elif record.kind == "tool_result":
                try:
                    message, update = decode_tool_result(record.data, where=where, state=state)
                except CheckpointCorrupt as exc:
                    raise CheckpointCorrupt(
                        f"{where}: unreadable tool result ({_why(exc)})"
                    ) from None
                results[message.tool_call_id] = (message, update)
        answered = {m.tool_call_id for m in state.messages if isinstance(m, ToolMessage)}
        return {k: v for k, v in results.items() if k not in answered}

    @staticmethod
    def _update(data: Mapping[str, object], where: str, state: State) -> dict[str, object]:
        # Channel by channel, to name the one at fault.
        out: dict[str, object] = {}
        for name, value in data.items():
            try:
                out.update(decode_update({name: value}, where=where, state=state))
            except CheckpointCorrupt as exc:
                raise CheckpointCorrupt(
                    f"{where}: unreadable update of channel {name[:40]!r} ({_why(exc)})"
                ) from None
        return out

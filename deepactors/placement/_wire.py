"""What crosses between a parent's process and a Ray worker: small records, sent in batches.

Three calls carry everything, each for many children at once (a Ray actor call
costs the caller ~0.6 ms of CPU; a record in a batch costs it microseconds):

- ``run(link, specs, starts)``: the parent starts a batch of children
  (:class:`Start`); the call lasts as long as the last of them, so Ray's task
  list shows the worker busy exactly while children of the batch run.
- ``control(link, orders)``: cancels, budget grants and refusals, messages for
  running children (:data:`Order`).
- ``pull(link)``: the parent's long poll; it returns what the worker's children
  sent since the last one, in the order they sent it (:data:`Report`):
  events, budget requests and settlements, outcomes.

Records are named tuples: they pickle as tuples, at a few microseconds each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..actors import ChildOutcome
from ..budget import Hold, Refusal
from ..context import ToolResult
from ..events import Event
from ..filediff import FileRecord
from ..interrupts import ActionRequest, Decision
from ..messages import Usage

__all__ = [
    "Cancel",
    "Charged",
    "Deny",
    "Done",
    "Dropped",
    "Emitted",
    "Grant",
    "Message",
    "Order",
    "ParentView",
    "Record",
    "Report",
    "Reserve",
    "Restored",
    "Settle",
    "Start",
    "Sync",
    "Synced",
    "Tools",
    "ToolsLeft",
]


class ParentView(NamedTuple):
    """What a child on a worker sees of the run that started it (one per parent run).

    Attributes:
        path: The parent's actor path.
        run_id: The parent's run id.
        thread_id: The thread, if the run has one.
        agent_name: The parent agent's name.
        depth: The parent's depth in its tree.
        context: The run's ``context=`` (sent by Ray's serialization).
        decisions: Human decisions the tree was resumed with, by tool call id.
        awaiting: Calls the thread still waits for a human on, by call id.
        max_steps: The run's step limit for every agent of the tree, if set.
        listening: Whether anyone listens to the parent's events.
        detail: Whether the listeners read token deltas and state snapshots.
    """

    path: str
    run_id: str
    thread_id: str | None
    agent_name: str
    depth: int
    context: Any
    decisions: Mapping[str, Decision]
    awaiting: Mapping[str, ActionRequest]
    max_steps: int | None
    listening: bool
    detail: bool


class Restored(NamedTuple):
    """A child's saved work, rebuilt by its parent from the thread's records.

    Attributes:
        updates: The state updates to replay, in order, each as applied.
        resumed: Results of the tool calls of its unfinished step, by call id.
        pending: The requests it stopped for a human on, unless answered.
    """

    updates: tuple[Mapping[str, Any], ...]
    resumed: Mapping[str, ToolResult]
    pending: tuple[ActionRequest, ...] | None


class Start(NamedTuple):
    """Start one child on the worker.

    Attributes:
        cid: The child's number on its link.
        agent: The key of the agent spec it runs (sent once per worker).
        description: Its brief.
        path: Its actor path.
        label: Its ``task-<n>`` label (conflict file names).
        files: The parent's files it starts from (its diff is taken against them).
        parent: The run that started it.
        deadline: When the worker stops it by itself (``time.time()`` seconds):
            the parent's deadline and a grace, so the parent's own cancel comes
            first; None without a deadline.
        budget: None when no budget covers it; else whether the parent's
            ledgers limit input tokens, output tokens and dollars (what the
            worker's reservations must estimate), and the tool calls left.
        trace: The W3C trace context of the ``task`` call that started it.
        durable: Whether the parent saves its thread: the child's records go
            to the parent's journal.
        restored: Its saved work, when the parent's run continues a thread
            in which it worked.
    """

    cid: int
    agent: str
    description: str
    path: str
    label: str
    files: Mapping[str, FileRecord]
    parent: ParentView
    deadline: float | None
    budget: tuple[bool, bool, bool, ToolsLeft] | None
    trace: Mapping[str, str]
    durable: bool
    restored: Restored | None


class Cancel(NamedTuple):
    """Cancel a child (its parent stopped waiting for it)."""

    cid: int


ToolsLeft = tuple[int, int] | None
"""Tool calls left at the parent's tightest ``tool_calls`` limit, and that limit
(None: no limit)."""


class Grant(NamedTuple):
    """A model call's reservation, granted by the parent's ledger."""

    cid: int
    rid: int
    hold: Hold
    tools: ToolsLeft


class Deny(NamedTuple):
    """A model call the parent's ledger refused: it must not be made."""

    cid: int
    rid: int
    refusal: Refusal
    tools: ToolsLeft


class Message(NamedTuple):
    """Messages for a running child (a background task's update)."""

    cid: int
    texts: tuple[str, ...]


class Synced(NamedTuple):
    """The parent's journal stored a child's records up to ``ticket`` (or failed)."""

    cid: int
    ticket: int
    error: str | None


Order = Cancel | Grant | Deny | Message | Synced
"""What the parent sends a running child."""


class Emitted(NamedTuple):
    """An event of a child (or of a subagent under it), for the parent's stream."""

    cid: int
    event: Event


class Reserve(NamedTuple):
    """A child asks to reserve a model call's worst case on the parent's ledger."""

    cid: int
    rid: int
    input_tokens: int
    output_tokens: int
    rates: tuple[int, int, int, int] | None


class Settle(NamedTuple):
    """A child ends the reservation its request ``rid`` was granted.

    Attributes:
        usage: What the call used; None charges the whole reservation (a call
            cut off), unless ``charge`` is false (the call was refused by its
            provider, or never made).
    """

    cid: int
    rid: int
    usage: Usage | None
    charge: bool


class Charged(NamedTuple):
    """Spending made elsewhere under a child (a remote subagent of its own).

    ``usd`` in pico-dollars, as the ledger counts it.
    """

    cid: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    usd: int


class Tools(NamedTuple):
    """Tool calls a child ran (counted on the parent's ledger)."""

    cid: int
    calls: int


class Record(NamedTuple):
    """A checkpoint record of a child (or of a subagent under it), for the parent's journal."""

    cid: int
    path: str
    step: int
    kind: str
    data: dict[str, Any]


class Sync(NamedTuple):
    """A child waits until the parent's journal has stored its records up to ``ticket``."""

    cid: int
    ticket: int


class Done(NamedTuple):
    """A child ended.

    Attributes:
        cid: The child.
        outcome: Its reply, as a local child's; None when it was cancelled.
        spent: Tokens it and its subagents spent, however it ended.
    """

    cid: int
    outcome: ChildOutcome | None
    spent: Usage | None


class Dropped(NamedTuple):
    """The worker dropped this link's reports: it heard nothing from the parent for
    longer than its orphan timeout, once the children were cancelled and once more.

    The only report of its pull (the link's children on that worker ended
    there, and what they sent is gone): the parent fails those it still waits for.

    Attributes:
        cid: Always 0 (the link's, not a child's).
        reports: How many reports were dropped.
        unheard: Seconds the worker went without hearing from the parent.
    """

    cid: int
    reports: int
    unheard: float


Report = Emitted | Reserve | Settle | Tools | Charged | Record | Sync | Done | Dropped
"""What a worker's children send their parent."""

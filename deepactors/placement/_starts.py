"""What a child's start carries from its parent: built once per parent run where it can be.

The parent's run as its children on workers see it (:func:`parent_view`, one
object per run, which pickles once per batch), the deadline on the workers'
clock, what the parent's ledgers limit, and the batch's name in Ray's dashboard.
"""

from __future__ import annotations

import math
import time

import anyio

from ..budget import BudgetLedger
from ..context import RunContext, RunKey
from ..events import wants_detail
from ._ship import culprit
from ._wire import ParentView, Start, ToolsLeft

__all__ = [
    "DEADLINE_GRACE",
    "batch_name",
    "budget_info",
    "deadline",
    "parent_view",
    "tools_left",
    "unsendable",
]

DEADLINE_GRACE = 1.0
"""Seconds a child is given on its worker past its parent's deadline: the
parent's own cancel, at the deadline, comes first; the worker's ends the
children of a parent that cannot send it any more."""


class _Views:
    """A parent run's view for its children on workers, made once per run."""

    __slots__ = ("view",)

    def __init__(self) -> None:
        self.view: ParentView | None = None


_VIEWS = RunKey("placement.views", _Views)


def unsendable(batch: list[Start], error: Exception) -> Exception:
    """Why a batch could not be sent, naming what in it cannot be pickled."""
    from ray import cloudpickle

    found = culprit(batch, cloudpickle.dumps)
    if found is None:
        return error
    where, why = found
    return ValueError(f"the child's {where.lstrip('[0123456789]')} cannot be sent: {why}")


def batch_name(batch: list[Start]) -> str:
    """The children of a batch, as Ray's dashboard shows its task: their labels."""
    first, last = batch[0].path.rsplit("/", 1)[-1], batch[-1].path.rsplit("/", 1)[-1]
    return first if len(batch) == 1 else f"{len(batch)} children, {first} .. {last}"


def parent_view(parent: RunContext) -> ParentView:
    """The parent run's view for its children on workers (one object per run)."""
    views = parent.local(_VIEWS)
    view = views.view
    if view is None:
        emit = parent.emit
        tree = parent.tree
        view = views.view = ParentView(
            path=parent.path,
            run_id=parent.run_id,
            thread_id=parent.thread_id,
            agent_name=parent.agent_name,
            depth=parent.depth,
            context=parent.context,
            decisions=dict(tree.decisions),
            awaiting=dict(tree.awaiting),
            max_steps=tree.max_steps,
            listening=emit is not None,
            detail=emit is not None and wants_detail(emit),
        )
    return view


def deadline() -> float | None:
    """The caller's deadline on the wall clock (workers' clocks), plus the grace."""
    deadline = anyio.current_effective_deadline()
    if math.isinf(deadline):
        return None
    return time.time() + max(0.0, deadline - anyio.current_time()) + DEADLINE_GRACE


def budget_info(ledger: BudgetLedger) -> tuple[bool, bool, bool, ToolsLeft]:
    return (ledger.tracks_input, ledger.tracks_output, ledger.tracks_usd, tools_left(ledger))


def tools_left(ledger: BudgetLedger) -> ToolsLeft:
    """Tool calls left under the tightest ``tool_calls`` limit above a child, and it."""
    tightest: ToolsLeft = None
    led: BudgetLedger | None = ledger
    while led is not None:
        limit = led.limits.tool_calls
        if limit is not None:
            left = max(0, limit - led.tool_calls)
            if tightest is None or left < tightest[0]:
                tightest = (left, limit)
        led = led.parent
    return tightest

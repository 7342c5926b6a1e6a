"""The parent's records: each child it placed, and each worker as one link sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, final

from .._core.loops import Latch, latch
from ..actors import ChildOutcome
from ..budget import BudgetLedger, Hold
from ..context import RunContext
from ._wire import Order, Start

__all__ = ["Lane", "LinkStatistics", "PlacedChild"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class LinkStatistics:
    """What one event loop placed on a placement's workers, and what it cost.

    Attributes:
        placed: Children placed since the loop began using the placement.
        running: Children placed and not ended yet.
        calls: Ray calls the parent made (batches of starts, orders, pulls):
            each costs it ~0.6-1.8 ms of CPU, whatever it carries.
        pulls: Of those, pulls (each brings what the workers' children sent).
        reports: Reports pulled (events, budget requests, records, outcomes).
    """

    placed: int
    running: int
    calls: int
    pulls: int
    reports: int


@dataclass(slots=True, kw_only=True, eq=False)
class PlacedChild:
    """A child placed on a worker, as its parent's side keeps it until its end."""

    cid: int
    path: str
    lane: Lane
    parent: RunContext
    ledger: BudgetLedger | None
    done: Latch = field(default_factory=latch)  # (one per child: see latch)
    outcome: ChildOutcome | None = None
    sent: bool = False  # its start left in a batch
    cancelled: bool = False  # its parent stopped waiting
    ended: bool = False  # its Done came (or its worker died)
    holds: dict[int, Hold] | None = None  # granted, not settled (made at the first)


@dataclass(slots=True, kw_only=True, eq=False)
class Lane:
    """One worker, as one link sees it."""

    slot: int
    handle: Any = None
    starts: list[Start] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    children: set[int] = field(default_factory=set)
    shipped: set[str] = field(default_factory=set)  # agent keys this handle has
    pulling: bool = False

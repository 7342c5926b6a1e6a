"""Placement: a tree's subagents run on Ray worker actors, over every core and many machines.

``create_deep_agent(..., placement=RayPlacement())`` puts the tree's subagents
(all, or those named) on Ray workers: each a :class:`RayAgent`, a
:class:`~deepactors.actors.ChildRunner` beside the runtime's local children.
The parent's tree sees each as a child actor: its events stream back under its
actor path, its answer and file changes merge through the same reducers, its
interrupts reach the parent's thread. The parent's deadline and cancel scope
reach it on its worker, the tree's budget is reserved in the parent's ledger
before each of its model calls, and a worker that dies fails only its own
children. See ``docs/ray.md``.

Needs Ray (``pip install 'deepactors[ray]'``), imported only when a placement
is first used.
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._link import LinkStatistics as LinkStatistics
from ._placement import DEFAULT_BATCH_WINDOW as DEFAULT_BATCH_WINDOW
from ._placement import DEFAULT_ORPHAN_TIMEOUT as DEFAULT_ORPHAN_TIMEOUT
from ._placement import DEFAULT_REPORT_WINDOW as DEFAULT_REPORT_WINDOW
from ._placement import RayAgent as RayAgent
from ._placement import RayPlacement as RayPlacement
from ._starts import DEADLINE_GRACE as DEADLINE_GRACE
from ._worker import PlacementWorker as PlacementWorker
from ._worker import WorkerInfo as WorkerInfo
from ._worker import WorkerStatistics as WorkerStatistics

__all__ = [
    "DEADLINE_GRACE",
    "DEFAULT_BATCH_WINDOW",
    "DEFAULT_ORPHAN_TIMEOUT",
    "DEFAULT_REPORT_WINDOW",
    "LinkStatistics",
    "PlacementWorker",
    "RayAgent",
    "RayPlacement",
    "WorkerInfo",
    "WorkerStatistics",
]

_publish(__all__, __name__, globals())

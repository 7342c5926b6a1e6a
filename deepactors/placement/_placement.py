""":class:`RayPlacement` (where a tree's subagents run) and :class:`RayAgent` (one placed).

``create_deep_agent(..., placement=RayPlacement())`` makes every subagent of
the tree (or those named in ``subagents=``) a :class:`RayAgent`: a
:class:`~deepactors.actors.ChildRunner` whose children run on Ray worker
actors, the same agent loop, middleware, tools, file backend and model as in
process, their answers and file changes merged by the parent's reducers as a
local child's are. See ``docs/ray.md``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

import anyio

from .._core.pacing import DEFAULT_QUANTUM
from .._core.perloop import PerLoop
from ..actors import AgentSpec, ChildOutcome
from ..budget import Budget, BudgetLedger
from ..context import Inbox, RunContext, TreeSlot
from ..errors import ConfigurationError
from ..filediff import FileRecord
from ._cluster import open_pool
from ._journal import restored_view
from ._link import Link, LinkStatistics
from ._ship import SpecPayload, ship
from ._worker import WorkerStatistics

__all__ = [
    "DEFAULT_BATCH_WINDOW",
    "DEFAULT_ORPHAN_TIMEOUT",
    "DEFAULT_REPORT_WINDOW",
    "RayAgent",
    "RayPlacement",
]

DEFAULT_ORPHAN_TIMEOUT = 30.0
"""Seconds a worker goes without hearing from a parent's loop before it cancels
that loop's children (a parent process that died, a loop that ended)."""

DEFAULT_BATCH_WINDOW = 0.02
"""Seconds a parent gathers children's starts into one call to a worker: each
call costs the parent ~1 ms of CPU and, while its children run, a task record
in Ray's core worker; a wide fan-out's children are started over many turns
of a busy loop."""

DEFAULT_REPORT_WINDOW = 0.2
"""Seconds a worker gathers its children's reports (events, outcomes) into one
pull by the parent (longer with more than twenty workers): a pull is a Ray call,
~0.6-1.8 ms of the parent's CPU; a budget reservation, which a model call waits
for, goes at once."""


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RayPlacement:
    """Where a tree's subagents run: Ray worker actors, on one machine's cores or a cluster.

    Give it to ``create_deep_agent(placement=...)``. Each worker actor (one
    per CPU of the cluster unless ``workers`` says) runs many children on its
    own event loop; the parent sends them in batches and reads their events,
    budget requests and outcomes back in batches, so a child costs its parent
    a fraction of a millisecond of CPU, whatever the child's own work costs
    its worker.

    Attributes:
        address: The Ray cluster: None starts a local Ray on this machine's
            cores (or joins the one this process is connected to, or the one
            ``RAY_ADDRESS`` names); ``"auto"`` joins the one ``ray start``
            runs here; ``"ray://host:10001"`` a remote cluster's client server.
        subagents: The subagent names to place (None: every subagent that
            can be; a ``fork`` subagent, which shares its parent's
            conversation, stays in process).
        agents: Import paths (``"package.module:attribute"``, a DeepAgent, an
            AgentSpec or a function returning one) by subagent name: the
            worker builds those agents itself. Others are sent by Ray's
            serialization (cloudpickle), once per worker.
        workers: Worker actors (None: the cluster's free CPUs over
            ``worker_cpus``, when the placement is first used).
        worker_cpus: CPUs Ray reserves for each worker actor.
        init: More keyword arguments for ``ray.init`` when this starts Ray
            (``runtime_env``, ``num_cpus``, ``namespace``...). By default Ray
            leaves the process's logging alone and workers' output stays in
            Ray's log files (``configure_logging=False, log_to_driver=False``).
        orphan_timeout: Seconds a worker waits to hear from a parent's loop
            before it cancels that loop's children.
        batch_window: Seconds a parent gathers children's starts into one call.
        report_window: Seconds a worker gathers its children's reports (events,
            outcomes) into one pull: more children per Ray call, each outcome
            up to that much later (a budget reservation or a checkpoint's
            sync is sent at once; with more than twenty workers each gathers
            for workers / 100 s, so a parent makes at most 100 pulls per second).
        pacing: Seconds of children's steps per turn of a worker's loop
            (None: unpaced); a busy worker reads cancels between slices.
        start_timeout: Seconds the workers may take to start.

    Raises:
        ConfigurationError: A count or a time that is not above 0.
    """

    address: str | None = None
    subagents: Sequence[str] | None = None
    agents: Mapping[str, str] = field(default_factory=dict)
    workers: int | None = None
    worker_cpus: float = 1.0
    init: Mapping[str, Any] = field(default_factory=dict)
    orphan_timeout: float = DEFAULT_ORPHAN_TIMEOUT
    batch_window: float = DEFAULT_BATCH_WINDOW
    report_window: float = DEFAULT_REPORT_WINDOW
    pacing: float | None = DEFAULT_QUANTUM
    start_timeout: float = 120.0
    _links: PerLoop[Link] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or self.workers < 1):
            raise ConfigurationError(
                f"RayPlacement workers must be 1 or more, not {self.workers!r}"
            )
        for key in ("worker_cpus", "orphan_timeout", "start_timeout"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and value > 0):
                raise ConfigurationError(f"RayPlacement {key} must be above 0, not {value!r}")
        for key in ("batch_window", "report_window"):
            if not getattr(self, key) >= 0:
                raise ConfigurationError(f"RayPlacement {key} must be 0 or more seconds")
        object.__setattr__(self, "_links", PerLoop(self._open, _close))

    def places(self, name: str) -> bool:
        """Whether the subagent ``name`` runs on Ray."""
        return self.subagents is None or name in self.subagents

    def agent(self, name: str, spec: AgentSpec) -> RayAgent:
        """The subagent ``name`` (its local spec ``spec``) placed on Ray."""
        return RayAgent(name=name, spec=spec, placement=self, import_path=self.agents.get(name))

    async def worker_statistics(self) -> list[WorkerStatistics]:
        """What each worker runs now, and where it is (starts Ray and the workers
        if nothing did yet)."""
        link = await self._links.get()
        return await link.worker_statistics()

    async def statistics(self) -> LinkStatistics:
        """What this event loop placed on the workers, and what it cost (starts
        Ray and the workers if nothing did yet)."""
        return (await self._links.get()).statistics()

    async def aclose(self) -> None:
        """Cancel this event loop's children on the workers now (else as the loop ends)."""
        await self._links.aclose()

    async def _open(self) -> Link:
        make = functools.partial(
            open_pool,
            self,
            address=self.address,
            init=self.init,
            workers=self.workers,
            worker_cpus=self.worker_cpus,
            orphan_timeout=self.orphan_timeout,
            pacing=self.pacing,
            start_timeout=self.start_timeout,
        )
        pool = await anyio.to_thread.run_sync(make)  # ray.init blocks for seconds
        link = Link(pool, self.batch_window, self.report_window)
        await link.start()
        return link


async def _close(link: Link) -> None:
    await link.aclose()


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RayAgent:
    """A subagent run on a placement's Ray workers: a :class:`~deepactors.actors.ChildRunner`.

    Made by :class:`RayPlacement` for ``create_deep_agent``, or given as a
    :class:`~deepactors.middleware.SubAgentSpec`'s ``agent`` directly.

    Attributes:
        name: The subagent's name.
        spec: Its agent, as in process (what is sent, unless ``import_path``).
        placement: Where it runs.
        import_path: Where a worker imports the agent from instead.
    """

    name: str
    spec: AgentSpec
    placement: RayPlacement
    import_path: str | None = None
    _key: str = field(init=False, repr=False)
    _payload: list[SpecPayload] = field(init=False, repr=False, default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", f"{self.name}-{uuid.uuid4().hex[:12]}")

    def payload(self) -> SpecPayload:
        """What makes the agent on a worker (made once).

        Raises:
            ConfigurationError: The agent cannot be sent; the message names
                the object that cannot.
        """
        if not self._payload:
            self._payload.append(ship(self.name, self.spec, self.import_path))
        return self._payload[0]

    def run_child(
        self,
        *,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        timeout: float | None,
        budget: Budget | None = None,
        inbox: Inbox | None = None,
    ) -> Awaitable[ChildOutcome]:
        """Run the child on a Ray worker and reply (see ``ChildRunner``).

        The child takes a slot of the tree's subagent cap here, before it is
        sent, and holds it until it ends; it draws on the parent's budget
        (within ``budget``) through the parent's ledger; the parent's deadline
        and ``timeout`` cancel it on its worker.
        """
        child = self._run(description, path, label, parent, files, budget, inbox)
        if timeout is None:
            # No scope at all without a timeout (one per child, at 100,000 children).
            return child
        return self._within(child, timeout, path)

    async def _within(
        self, child: Awaitable[ChildOutcome], timeout: float, path: str
    ) -> ChildOutcome:
        with anyio.move_on_after(timeout):
            return await child
        return ChildOutcome.timed_out(
            path,
            timeout,
            "The subagent",
            "it was cancelled on its Ray worker and none of its file changes were kept",
        )

    async def _run(
        self,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        budget: Budget | None,
        inbox: Inbox | None,
    ) -> ChildOutcome:
        payload = self.payload()
        restored = restored_view(parent, path, self.spec, files)
        ledger = parent.budget if budget is None else BudgetLedger(budget, parent=parent.budget)
        limiter = parent.tree.subagent_limiter
        slot = TreeSlot(limiter) if limiter is not None else None
        lender = parent.slot
        if lender is not None:
            lender.lend()
        try:
            if slot is not None:
                await slot.acquire()
            link = await self.placement._links.get()
            child = link.place(
                agent=self._key,
                payload=payload,
                description=description,
                path=path,
                label=label,
                parent=parent,
                files=files,
                ledger=ledger,
                restored=restored,
            )
            try:
                if inbox is None:
                    await child.done.wait()
                else:
                    await link.follow(child, inbox)
            except BaseException:
                await link.abandon(child)  # cancels it on its worker
                raise
            outcome = child.outcome
            if outcome is None:  # its worker cancelled it (it lost its parent's link)
                return ChildOutcome.failed(path, "the subagent was cancelled on its Ray worker")
            return outcome
        finally:
            if slot is not None:
                slot.release()
            if lender is not None:
                await lender.reclaim()

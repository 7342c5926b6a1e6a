"""The Ray worker actor: runs many children of many parents on its own event loop.

One :class:`PlacementWorker` per worker process (a Ray actor, asyncio): each
child it is sent runs there as it would in its parent's process, through
:func:`deepactors.actors.run_child`, under a stand-in for its parent's run
(:class:`~deepactors.context.RunContext`) that sends what the child emits,
reserves and spends back to the parent, in the batches of :mod:`._wire`.

A parent's process talks to a worker over a *link* (one per parent event loop):
its children, the reports they send, and when it was last heard from. A link
not heard from for ``orphan_timeout`` seconds (its process died, or its loop
ended without closing it) has its children cancelled: no child outlives its
parent for long, even when nothing else is left to cancel it. Their ends are
kept for the parent, should it be heard from again (a loop held up, not gone):
it reads them as failed. A link that goes unheard as long once more is dropped,
and a parent that comes back after that is told so (:class:`~._wire.Dropped`),
never left waiting for reports that will not come. Time the worker's own loop
could not run (a starved process) does not count as the parent's silence.

The children's steps are paced (:class:`~deepactors._core.pacing.Pacer`), so a
worker busy with thousands of them still reads a cancel between two slices of
~5 ms.
"""

from __future__ import annotations

import os
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

import anyio

from .._core.loops import spawn_system_task
from .._core.pacing import Pacer
from ..actors import AgentSpec, ChildOutcome, run_child
from ..context import Inbox, RunContext, TreeContext
from ..errors import ConfigurationError
from ..events import Event
from ..tracing import attach_traceparent, detach_traceparent
from ._journal import ChildJournal, RestoredRecords
from ._ledger import WorkerLedger
from ._ship import SpecPayload, unship
from ._wire import (
    Cancel,
    Deny,
    Done,
    Dropped,
    Emitted,
    Grant,
    Message,
    Order,
    Report,
    Settle,
    Start,
    Synced,
)

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context

__all__ = ["PlacementWorker", "WorkerInfo", "WorkerStatistics"]

MAX_DROPPED = 4096
"""Dropped links a worker remembers, to tell a parent that comes back."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerInfo:
    """Where a worker runs: its process and node (for errors, and for Ray's tools)."""

    pid: int
    host: str
    node_id: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStatistics:
    """What a worker runs, every parent's children together.

    Attributes:
        where: The worker's process and node.
        running: Children running now.
        finished: Children that ended here since the worker started (however
            they ended).
        links: Parent event loops with children here (or heard from lately).
    """

    where: WorkerInfo
    running: int
    finished: int
    links: int


@dataclass(slots=True, kw_only=True, eq=False)
class _Link:
    """One parent event loop's children on this worker, and what they sent it."""

    outbox: list[Report] = field(default_factory=list)
    arrived: anyio.Event = field(default_factory=anyio.Event)
    urgent: anyio.Event = field(default_factory=anyio.Event)  # go now: see send_now()
    since: float = 0.0  # when the oldest report in the outbox was sent
    full: int = 512  # reports that make a pull go at once (the parent says)
    scopes: dict[int, anyio.CancelScope] = field(default_factory=dict)
    ledgers: dict[int, WorkerLedger] = field(default_factory=dict)
    journals: dict[int, ChildJournal] = field(default_factory=dict)
    inboxes: dict[int, Inbox] = field(default_factory=dict)
    cancelled: set[int] = field(default_factory=set)  # by their parents
    orphaned: set[int] = field(default_factory=set)  # cancelled: the parent went unheard
    heard: float = field(default_factory=anyio.current_time)  # (the worker's loop's clock)
    pulling: int = 0

    def send(self, report: Report) -> None:
        outbox = self.outbox
        if not outbox:
            self.since = anyio.current_time()
            self.arrived.set()
        outbox.append(report)
        if len(outbox) >= self.full:
            self.urgent.set()  # a full batch: no reason to wait

    def send_now(self, report: Report) -> None:
        """Send a report someone waits for (a reservation): the pull returns at once."""
        self.send(report)
        self.urgent.set()


class _Emitter:
    """A child's event sink on the worker: events go to its parent, batched."""

    __slots__ = ("_cid", "_link", "structural_only")

    def __init__(self, link: _Link, cid: int, detail: bool) -> None:
        self._link = link
        self._cid = cid
        # Read by wants_detail(): no token deltas or snapshots nobody reads.
        self.structural_only = not detail

    def __call__(self, event: Event) -> None:
        self._link.send(Emitted(self._cid, event))


def _continue_trace(carrier: Mapping[str, str]) -> Token[Context] | None:
    """Make the parent's trace context current for the child (its tools' spans,
    its SDK's requests); a token to undo it, or None when there is none."""
    if not carrier:
        return None
    try:  # (the parent is traced: OpenTelemetry's API is installed there, maybe not here)
        import opentelemetry.propagate  # noqa: F401
    except ImportError:
        return None
    return attach_traceparent(
        (k.encode("latin-1"), v.encode("latin-1")) for k, v in carrier.items()
    )


@final
class PlacementWorker:
    """The body of a Ray worker actor (see the module docstring).

    Args:
        orphan_timeout: Seconds a link may go unheard before its children are
            cancelled.
        pacing: Seconds of children's steps per loop turn (None: unpaced).
    """

    def __init__(self, orphan_timeout: float, pacing: float | None) -> None:
        self._specs: dict[str, AgentSpec | ConfigurationError] = {}
        self._links: dict[str, _Link] = {}
        # Links dropped with reports unread: (reports, seconds unheard), by link id.
        self._dropped: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._orphan_timeout = orphan_timeout
        self._pacing = pacing
        self._pacer: Pacer | None = None
        self._started = False
        self._finished = 0

    def __repr__(self) -> str:
        # What Ray's dashboard shows for the actor.
        running = sum(len(link.scopes) for link in self._links.values())
        return f"deepactors worker (pid {os.getpid()}, {running} children running)"

    def _start(self) -> None:
        # The worker's own tasks, on its loop, started with the first call.
        if self._started:
            return
        self._started = True
        if self._pacing is not None:
            self._pacer = pacer = Pacer(self._pacing)
            spawn_system_task(pacer.run)
        spawn_system_task(self._watch_orphans)

    async def info(self) -> WorkerInfo:
        """Where this worker runs."""
        self._start()
        node = ""
        try:
            import ray

            # (Asked outside a Ray worker, get_runtime_context() would start a
            # local Ray: seconds, and a cluster's processes, for a message.)
            if ray.is_initialized():
                node = ray.get_runtime_context().get_node_id()
        except Exception:  # outside Ray (no matter: for messages only)
            node = ""
        return WorkerInfo(pid=os.getpid(), host=socket.gethostname(), node_id=node)

    async def statistics(self) -> WorkerStatistics:
        """What this worker runs (for tests, and for whoever looks at a cluster)."""
        running = sum(len(link.scopes) for link in self._links.values())
        return WorkerStatistics(
            where=await self.info(),
            running=running,
            finished=self._finished,
            links=len(self._links),
        )

    async def run(self, link_id: str, specs: dict[str, SpecPayload], starts: list[Start]) -> int:
        """Run a batch of children to their ends; return how many there were."""
        self._start()
        link = self._link(link_id)
        for key, payload in specs.items():
            if key not in self._specs:
                try:
                    self._specs[key] = unship(payload)
                except ConfigurationError as exc:
                    self._specs[key] = exc
                except Exception as exc:  # unpickling runs the user's code
                    self._specs[key] = ConfigurationError(
                        f"the agent could not be unpickled on the Ray worker: "
                        f"{type(exc).__name__}: {exc}"
                    )
        async with anyio.create_task_group() as tg:
            for start in starts:
                tg.start_soon(self._child, link, start)
        return len(starts)

    async def control(self, link_id: str, orders: list[Order]) -> None:
        """Cancels, budget answers and messages for running children."""
        link = self._link(link_id)
        link.heard = anyio.current_time()
        for order in orders:
            match order:
                case Cancel(cid=cid):
                    # Kept: its start may still be on its way, and its end
                    # reads it (cancelled by its parent, not timed out).
                    link.cancelled.add(cid)
                    scope = link.scopes.get(cid)
                    if scope is not None:
                        scope.cancel()
                case Grant(cid=cid, rid=rid, hold=hold, tools=tools):
                    ledger = link.ledgers.get(cid)
                    if ledger is None or not ledger.answer(rid, hold, tools):
                        link.send(Settle(cid, rid, None, False))  # nobody waits: unspent
                case Deny(cid=cid, rid=rid, refusal=refusal, tools=tools):
                    ledger = link.ledgers.get(cid)
                    if ledger is not None:
                        ledger.answer(rid, refusal, tools)
                case Message(cid=cid, texts=texts):
                    # Kept for a child not started here yet: a message sent
                    # just after its start may overtake it (its batch still
                    # gathering in the parent, or Ray running this call
                    # first); the child reads it at its first turn.
                    inbox = link.inboxes.get(cid)
                    if inbox is None:
                        inbox = link.inboxes[cid] = Inbox()
                    for text in texts:
                        inbox.put(text)
                case Synced(cid=cid, ticket=ticket, error=error):
                    journal = link.journals.get(cid)
                    if journal is not None:
                        journal.synced(ticket, error)

    async def pull(self, link_id: str, wait: float, linger: float, full: int) -> list[Report]:
        """What the link's children sent since the last pull.

        Waits up to ``wait`` seconds for a first report, then until the oldest
        is ``linger`` seconds old, so that one pull (a Ray call, which costs
        the parent ~0.6 ms of CPU) brings many; ``full`` reports, or one a
        model call waits for (a reservation, a checkpoint's sync), end the
        lingering at once. A link this worker dropped answers
        :class:`~._wire.Dropped` alone, once.
        """
        dropped = self._dropped.pop(link_id, None)
        if dropped is not None:
            return [Dropped(0, *dropped)]
        link = self._link(link_id)
        link.full = full
        link.heard = anyio.current_time()
        link.pulling += 1
        try:
            if not link.outbox:
                with anyio.move_on_after(wait):
                    await link.arrived.wait()
            if link.outbox and not link.urgent.is_set():
                with anyio.move_on_after(link.since + linger - anyio.current_time()):
                    await link.urgent.wait()
        finally:
            link.pulling -= 1
            link.heard = anyio.current_time()
        sent, link.outbox = link.outbox, []
        link.arrived = anyio.Event()
        link.urgent = anyio.Event()
        return sent

    async def close(self, link_id: str) -> None:
        """The parent's loop ends: cancel its children here, and forget the link."""
        link = self._links.pop(link_id, None)
        if link is not None:
            for scope in link.scopes.values():
                scope.cancel()

    def _link(self, link_id: str) -> _Link:
        link = self._links.get(link_id)
        if link is None:
            link = self._links[link_id] = _Link()
        return link

    async def _watch_orphans(self) -> None:
        period = max(0.05, self._orphan_timeout / 4)
        last = anyio.current_time()
        while True:
            await anyio.sleep(period)
            now = anyio.current_time()
            # A late tick: this worker's loop could not run meanwhile (a wave
            # of children's steps that compute, a process short of CPU), and
            # neither could the parent's calls queued for it, which start on
            # the loop. That time is the worker's, not the parent's silence: it
            # does not count. (All of it: a loop held for most of each period,
            # tick after tick, would add up to an orphan's silence otherwise.)
            late = max(0.0, now - last - period)
            last = now
            for link_id, link in list(self._links.items()):
                link.heard += late
                if not link.pulling and now - link.heard > self._orphan_timeout:
                    self._orphan(link_id, link, now)

    def _orphan(self, link_id: str, link: _Link, now: float) -> None:
        """The parent of ``link`` went unheard: cancel its children, or drop the link."""
        if link.scopes:
            # Cancelled, and their ends kept: a parent held up, not gone, reads them.
            link.orphaned.update(link.scopes)
            for scope in link.scopes.values():
                scope.cancel()
            link.heard = now  # the same time again before the link is dropped
            return
        del self._links[link_id]
        if link.outbox:  # unread: a parent that comes back must hear it
            self._dropped[link_id] = (len(link.outbox), now - link.heard + self._orphan_timeout)
            while len(self._dropped) > MAX_DROPPED:
                self._dropped.popitem(last=False)

    async def _child(self, link: _Link, start: Start) -> None:
        cid = start.cid
        spec = self._specs.get(start.agent)
        if cid in link.cancelled:  # before it started
            link.cancelled.discard(cid)
            link.inboxes.pop(cid, None)
            self._finished += 1  # (ended, however: see WorkerStatistics)
            link.send(Done(cid, None, None))
            return
        if not isinstance(spec, AgentSpec):
            link.inboxes.pop(cid, None)
            why = spec or ConfigurationError(f"the agent {start.agent!r} never reached the worker")
            failed = ChildOutcome.failed(start.path, str(why))
            self._finished += 1
            link.send(Done(cid, failed, None))
            return
        scope = anyio.CancelScope()
        link.scopes[cid] = scope
        run = self._stand_in(link, start)
        inbox = link.inboxes.get(cid)  # (made already if a message came first)
        if inbox is None:
            inbox = link.inboxes[cid] = Inbox()
        outcome: ChildOutcome | None = None
        token = _continue_trace(start.trace)
        try:
            with scope:
                if start.deadline is not None:
                    scope.deadline = anyio.current_time() + (start.deadline - time.time())
                outcome = await run_child(
                    spec,
                    description=start.description,
                    path=start.path,
                    label=start.label,
                    parent=run,
                    files=start.files,
                    timeout=None,
                    inbox=inbox,
                )
            if outcome is None and cid in link.orphaned:
                outcome = ChildOutcome.failed(
                    start.path,
                    f"cancelled on its Ray worker (pid {os.getpid()}): the worker heard "
                    f"nothing from its parent for more than {self._orphan_timeout:g} s "
                    "(the placement's orphan_timeout)",
                )
            elif outcome is None and scope.cancelled_caught and cid not in link.cancelled:
                outcome = ChildOutcome(
                    status="timed_out",
                    answer="The subagent passed its parent's deadline on its Ray worker; it "
                    "was cancelled and none of its file changes were kept.",
                    diff=None,
                    path=start.path,
                )
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # from a tool, say
            outcome = ChildOutcome.failed(start.path, f"{type(exc).__name__}: {exc}")
        finally:
            if token is not None:
                detach_traceparent(token)
            del link.scopes[cid]
            del link.inboxes[cid]
            link.journals.pop(cid, None)
            link.cancelled.discard(cid)
            link.orphaned.discard(cid)
            ledger = link.ledgers.pop(cid, None)
            if ledger is not None:
                ledger.close()
            self._finished += 1
            link.send(Done(cid, outcome, run.usage))

    def _stand_in(self, link: _Link, start: Start) -> RunContext:
        """The child's parent, as the child sees it on the worker."""
        parent = start.parent
        emit = _Emitter(link, start.cid, parent.detail) if parent.listening else None
        ledger = None
        if start.budget is not None:
            *tracks, tools = start.budget
            ledger = link.ledgers[start.cid] = WorkerLedger(
                start.cid, link.send, link.send_now, (tracks[0], tracks[1], tracks[2]), tools
            )
        journal = None
        if start.durable:
            journal = link.journals[start.cid] = ChildJournal(start.cid, link.send, link.send_now)
        restored = start.restored
        tree = TreeContext(
            thread_id=parent.thread_id,
            decisions=parent.decisions,
            awaiting=parent.awaiting,
            journal=journal,
            restored=None if restored is None else RestoredRecords(start.path, restored),
            max_steps=parent.max_steps,
            budget=ledger,
            pacer=self._pacer,
        )
        context: Any = parent.context
        return RunContext(
            path=parent.path,
            run_id=parent.run_id,
            thread_id=parent.thread_id,
            agent_name=parent.agent_name,
            depth=parent.depth,
            emit=emit,
            context=context,
            tree=tree,
            budget=ledger,
        )

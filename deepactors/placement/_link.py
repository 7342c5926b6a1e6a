"""The parent's side: one link per event loop to a placement's workers.

A :class:`Link` keeps, for the children its loop placed, what each waits for,
and talks to each worker (a :class:`~._records.Lane`) in batches: children started
within ``batch_window`` of each other go in one ``run`` call, every order for a
worker in one ``control`` call, and one ``pull`` per worker at a time brings
back what its children sent. So a child costs its parent a few records
pickled and unpickled, not a Ray call (which costs ~0.6 ms of the caller's
CPU), and 100,000 children are 100,000 small records and one event each, with
a handful of Ray calls in flight.

A pull that fails because its worker died (the process, or its node) fails
that worker's children, and only them; the reservations they held on the
budget are charged whole (the safe side); the worker is replaced for the
children that come next. Nothing a child finished is run again.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

import anyio
import anyio.lowlevel

from .._core.loops import current_run, spawn_system_task
from ..actors import ChildOutcome
from ..budget import BudgetLedger, Hold
from ..context import Inbox, RunContext
from ..filediff import FileRecord
from ..tracing import outgoing_headers
from ._cluster import Pool, WorkerLost, result_of, when_done
from ._records import Lane, LinkStatistics, PlacedChild
from ._ship import SpecPayload
from ._starts import batch_name, budget_info, deadline, parent_view, tools_left, unsendable
from ._wire import (
    Cancel,
    Charged,
    Deny,
    Done,
    Dropped,
    Emitted,
    Grant,
    Message,
    Record,
    Report,
    Reserve,
    Restored,
    Settle,
    Start,
    Sync,
    Synced,
    Tools,
)
from ._worker import WorkerStatistics

__all__ = ["PULL_WAIT", "Link", "LinkStatistics"]

PULL_WAIT = 5.0
"""Seconds a pull waits on a worker with nothing to report: how often an idle
link is heard from (the worker's orphan watch counts on it)."""

MAX_BATCH = 1024
"""Children per ``run`` call at most: a batch is pickled in one go on the loop."""

FULL_PULL = 512
"""Reports that make a worker answer a pull without lingering further."""

PULLS_PER_SECOND = 100
"""Pulls a link makes per second at most, every worker together, while reports
trickle in (each costs the parent ~0.6 ms of CPU): with many workers, each
lingers longer than ``report_window``."""


class Link:
    """One event loop's children on one placement's workers (see the module docstring).

    Args:
        pool: The placement's workers.
        batch_window: Seconds to gather children's starts into one call.
        report_window: Seconds a worker gathers its children's reports into
            one pull (a reservation request is sent at once).
    """

    def __init__(self, pool: Pool, batch_window: float, report_window: float) -> None:
        self.id = uuid.uuid4().hex
        self._pool = pool
        self._window = batch_window
        self._linger = report_window
        self._lanes = [Lane(slot=i) for i in range(len(pool.handles))]
        self._children: dict[int, PlacedChild] = {}
        self._next = 0
        self._wake = anyio.Event()
        self._payloads: dict[str, SpecPayload] = {}
        self._tg: Any = None
        self._calls = self._pulls = self._reports = 0

    async def worker_statistics(self) -> list[WorkerStatistics]:
        """Each worker's statistics, asked now (in the order of their slots)."""
        out = []
        pool = self._pool
        for lane in self._lanes:
            handle = self._handle(lane)
            stats = await result_of(handle.statistics.remote())
            if pool.infos[lane.slot] is None and pool.handles[lane.slot] is handle:
                pool.infos[lane.slot] = stats.where  # it answered: it is up
            out.append(stats)
        return out

    def statistics(self) -> LinkStatistics:
        """What this link placed and what it cost (see :class:`LinkStatistics`)."""
        return LinkStatistics(
            placed=self._next,
            running=self.live,
            calls=self._calls,
            pulls=self._pulls,
            reports=self._reports,
        )

    async def start(self) -> None:
        """Start the link's tasks (a system task of the caller's loop run, which ends them)."""
        started = anyio.Event()

        async def serve() -> None:
            # A system task must not raise: a bug here leaves the children
            # to their deadlines (and the workers' orphan watch), not a crash.
            with contextlib.suppress(Exception):
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    tg.start_soon(self._flusher)
                    started.set()

        spawn_system_task(serve)
        await started.wait()

    @property
    def live(self) -> int:
        """Children of this link not ended yet."""
        return sum(not c.ended for c in self._children.values())

    async def aclose(self) -> None:
        """Cancel this link's children on every worker (its loop is ending)."""
        for lane in self._lanes:
            if lane.handle is not None:
                when_done(lane.handle.close.remote(self.id), _quietly)
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    # -- a child's run ---------------------------------------------------------------

    def place(
        self,
        *,
        agent: str,
        payload: SpecPayload,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        ledger: BudgetLedger | None,
        restored: Restored | None,
    ) -> PlacedChild:
        """Place one child: it leaves with the next batch; its caller awaits it.

        The caller waits for ``child.done`` (or :meth:`follow` with an inbox),
        then reads ``child.outcome`` (None: it was cancelled on its worker); if
        the wait is cancelled, it calls :meth:`abandon`. (The wait is the
        caller's own, not a coroutine of this link's: a parent waiting on
        100,000 children keeps one frame less per child.)
        """
        self._payloads.setdefault(agent, payload)
        lane = self._least_busy()
        self._next += 1
        cid = self._next
        child = PlacedChild(cid=cid, path=path, lane=lane, parent=parent, ledger=ledger)
        self._children[cid] = child
        lane.children.add(cid)
        lane.starts.append(
            Start(
                cid=cid,
                agent=agent,
                description=description,
                path=path,
                label=label,
                files=dict(files),  # copy-on-write records: a snapshot of the mapping
                parent=parent_view(parent),
                deadline=deadline(),
                budget=None if ledger is None else budget_info(ledger),
                trace=outgoing_headers(),
                durable=parent.journal is not None,
                restored=restored,
            )
        )
        self._wake.set()
        if not lane.pulling:
            self._pull_soon(lane)
        return child

    async def abandon(self, child: PlacedChild) -> None:
        """Its caller stopped waiting: cancel the child on its worker, unless it ended.

        The order leaves before the caller's cancellation is raised on.
        """
        if not child.ended:
            await self._cancel(child)

    def _least_busy(self) -> Lane:
        """The lane for the next child: the least busy of the workers that are up.

        A worker that replaces a dead one is up once it has started: until then
        (its node may be gone, and the cluster without a free CPU for it for a
        while, or for good) children go to the others, unless none is up.
        """
        infos = self._pool.infos
        up = [lane for lane in self._lanes if infos[lane.slot] is not None] or self._lanes
        return min(up, key=lambda lane: len(lane.children))

    async def follow(self, child: PlacedChild, inbox: Inbox) -> None:
        """Wait for the child's end, sending it what comes to its inbox meanwhile."""

        async def forward() -> None:
            while True:
                await inbox.wait()
                child.lane.orders.append(Message(child.cid, tuple(inbox.take())))
                self._send_orders(child.lane)

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            await child.done.wait()
            tg.cancel_scope.cancel()

    async def _cancel(self, child: PlacedChild) -> None:
        child.cancelled = True
        lane = child.lane
        if not child.sent:
            self._end(child)  # never left: the flusher skips it
            return
        lane.orders.append(Cancel(child.cid))
        # Every sibling cancelled with it appends its order in this turn of the
        # loop; the first to come back sends them all in one call.
        with anyio.CancelScope(shield=True):
            await anyio.lowlevel.checkpoint()
        self._send_orders(lane)

    # -- sending -----------------------------------------------------------------------

    async def _flusher(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._window > 0:
                await anyio.sleep(self._window)  # gather the rest of a fan-out's starts
            for lane in self._lanes:
                self._send_starts(lane)

    def _handle(self, lane: Lane) -> Any:
        current = self._pool.handles[lane.slot]
        if current is not lane.handle:  # a new worker in the slot: it has nothing yet
            lane.handle = current
            lane.shipped = set()
        return current

    def _send_starts(self, lane: Lane) -> None:
        # (A child cancelled before it left is forgotten already, or marked.)
        children = self._children
        starts = [s for s in lane.starts if s.cid in children and not children[s.cid].cancelled]
        lane.starts = []
        if not starts:
            return
        handle = self._handle(lane)
        for i in range(0, len(starts), MAX_BATCH):
            batch = starts[i : i + MAX_BATCH]
            specs = {}
            for start in batch:
                self._children[start.cid].sent = True
                if start.agent not in lane.shipped:
                    specs[start.agent] = self._payloads[start.agent]
                    lane.shipped.add(start.agent)
            cids = [s.cid for s in batch]
            # Named for Ray's dashboard and state API: whose children these are.
            name = f"{batch[0].parent.path}: {batch_name(batch)}"
            try:
                ref = handle.run.options(name=name).remote(self.id, specs, batch)
            except Exception as exc:  # what a child carries cannot be sent (its context)
                self._batch_failed(cids, unsendable(batch, exc))
                continue
            when_done(ref, self._on_batch(cids))
            self._calls += 1

    def _send_orders(self, lane: Lane) -> None:
        if not lane.orders:
            return
        orders, lane.orders = lane.orders, []
        when_done(self._handle(lane).control.remote(self.id, orders), _quietly)
        self._calls += 1

    # -- receiving ---------------------------------------------------------------------

    def _on_batch(self, cids: list[int]) -> Callable[[Future[Any]], None]:
        run = current_run()

        def ended(future: Future[Any]) -> None:  # (in Ray's thread)
            error = future.exception()
            if error is not None:
                run.call_soon(lambda: self._batch_failed(cids, error))

        return ended

    def _pull_soon(self, lane: Lane) -> None:
        lane.pulling = True
        self._tg.start_soon(self._pull, lane)

    async def _pull(self, lane: Lane) -> None:
        try:
            while lane.children:
                handle = self._handle(lane)
                try:
                    linger = max(self._linger, len(self._lanes) / PULLS_PER_SECOND)
                    pulled = handle.pull.remote(self.id, PULL_WAIT, linger, FULL_PULL)
                    self._calls += 1
                    self._pulls += 1
                    reports = await result_of(pulled)
                except WorkerLost as exc:
                    self._lost(lane, handle, exc)
                    continue
                except Exception as exc:  # a pull that failed otherwise: as lost too
                    self._lost(lane, handle, exc)
                    continue
                self._reports += len(reports)
                if reports and isinstance(reports[0], Dropped):
                    self._unheard(lane, reports[0])
                    continue
                for report in reports:
                    self._dispatch(report)
                self._send_orders(lane)  # the grants, at once: calls wait for them
        finally:
            lane.pulling = False

    def _dispatch(self, report: Report) -> None:
        child = self._children.get(report.cid)
        if child is None:
            return
        match report:
            case Emitted(event=event):
                emit = child.parent.emit
                if emit is not None and not child.cancelled:
                    emit(event)
            case Reserve():
                self._reserve(child, report)
            case Settle(rid=rid, usage=usage, charge=charge):
                hold = None if child.holds is None else child.holds.pop(rid, None)
                if hold is not None and child.ledger is not None:
                    child.ledger.settle(hold, usage, charge=charge)
                if child.ended and not child.holds:
                    self._forget(child)
            case Tools(calls=calls):
                if child.ledger is not None:
                    child.ledger.add_spent(0, 0, 0, calls, 0)
            case Charged():
                if child.ledger is not None:
                    child.ledger.add_spent(*report[1:])
            case Record(path=path, step=step, kind=kind, data=data):
                journal = child.parent.journal
                if journal is not None and not child.cancelled:
                    # (A cancelled child's late records are not its thread's:
                    # its parent's run may have ended, and its journal with it.)
                    journal.record(path, step, kind, data)
            case Sync(ticket=ticket):
                self._tg.start_soon(self._sync, child, ticket)
            case Done(outcome=outcome, spent=spent):
                child.parent.add_usage(spent)
                child.outcome = outcome
                self._end(child)

    def _reserve(self, child: PlacedChild, ask: Reserve) -> None:
        ledger = child.ledger
        if ledger is None or child.cancelled or child.ended:
            return  # it is being cancelled: its call will not be made
        answer = ledger.try_reserve(ask.input_tokens, ask.output_tokens, ask.rates)
        lane = child.lane
        if isinstance(answer, Hold):
            if child.holds is None:
                child.holds = {}
            child.holds[ask.rid] = answer
            lane.orders.append(Grant(child.cid, ask.rid, answer, tools_left(ledger)))
        elif isinstance(answer, anyio.Event):
            # Calls in flight hold what it needs: asked again when they settle.
            self._tg.start_soon(self._reserve_later, child, ask, answer)
        else:
            lane.orders.append(Deny(child.cid, ask.rid, answer, tools_left(ledger)))

    async def _sync(self, child: PlacedChild, ticket: int) -> None:
        """Answer a child waiting until its records are stored (they were
        recorded in the parent's journal before its request came)."""
        journal = child.parent.journal
        error = None
        if journal is not None and not child.cancelled:
            try:
                await journal.sync()
            except Exception as exc:  # CheckpointError: the child's sync raises it
                error = str(exc)
        child.lane.orders.append(Synced(child.cid, ticket, error))
        self._send_orders(child.lane)

    async def _reserve_later(self, child: PlacedChild, ask: Reserve, changed: anyio.Event) -> None:
        await changed.wait()
        self._reserve(child, ask)
        self._send_orders(child.lane)

    def _end(self, child: PlacedChild) -> None:
        """The child's end (its outcome, if any, set): its waiter goes on."""
        if child.ended:
            return
        child.ended = True
        child.lane.children.discard(child.cid)
        child.done.set()
        if not child.holds:
            self._forget(child)

    def _forget(self, child: PlacedChild) -> None:
        self._children.pop(child.cid, None)

    def _lost(self, lane: Lane, handle: Any, error: BaseException) -> None:
        """The lane's worker died: the children it was sent fail, their holds are
        charged whole; those not sent yet go to its replacement."""
        why = f"the Ray worker running it{self._where(lane)} died or cannot be reached"
        self._fail_sent(lane, f"{why}: {_first_line(error)}")
        self._pool.replace(lane.slot, handle)

    def _unheard(self, lane: Lane, dropped: Dropped) -> None:
        """The lane's worker dropped this link (it went unheard too long): the
        children it was sent ended there unread and fail; any still running
        there (sent after the drop) are cancelled."""
        failed = self._fail_sent(
            lane,
            f"its Ray worker{self._where(lane)} heard nothing from this parent for "
            f"{dropped.unheard:.0f} s and dropped what its children sent ({dropped.reports} "
            "reports): the parent's event loop was held up longer than the placement's "
            "orphan_timeout",
        )
        lane.orders.extend(Cancel(cid) for cid in failed)
        self._send_orders(lane)

    def _where(self, lane: Lane) -> str:
        info = self._pool.infos[lane.slot]
        return "" if info is None else f" (pid {info.pid} on {info.host})"

    def _fail_sent(self, lane: Lane, why: str) -> list[int]:
        """Fail the lane's children that were sent and have not ended; their holds
        are charged whole (what they spent is unknown). Returns their ids."""
        failed = []
        for cid in list(lane.children):
            child = self._children.get(cid)
            if child is None or not child.sent:
                continue
            if child.ledger is not None and child.holds:
                for hold in child.holds.values():
                    child.ledger.settle(hold, None)  # cut off: charged whole
            child.holds = None
            child.outcome = ChildOutcome.failed(child.path, why)
            self._end(child)
            failed.append(cid)
        return failed

    def _batch_failed(self, cids: list[int], error: BaseException) -> None:
        """A ``run`` call failed as a whole (its children never started)."""
        for cid in cids:
            child = self._children.get(cid)
            if child is None or child.ended:
                continue
            if isinstance(error, WorkerLost) or _is_actor_error(error):
                continue  # its pull says so, and replaces the worker
            child.outcome = ChildOutcome.failed(
                child.path, f"could not start on its Ray worker: {_first_line(error)}"
            )
            self._end(child)


def _quietly(future: Any) -> None:
    future.exception()  # read, so Ray does not report it unhandled


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _is_actor_error(error: BaseException) -> bool:
    import ray.exceptions

    return isinstance(error, ray.exceptions.RayActorError | ray.exceptions.ActorUnavailableError)

"""Thread actors: one per conversation thread, each with a mailbox of orders.

An order is a run (:class:`RunOrder`) or an operation on the thread's saved
records (:class:`OpOrder`: a rollback, a delete, reading the head). The actor
takes them one at a time, in arrival order, and executes each while it holds
the thread's lease (:meth:`Checkpointer.lease
<deepactors.persistence.Checkpointer.lease>`): inside one runtime the mailbox
orders a thread's work, and across runtimes, event loops and processes the
lease does. Nothing else writes a thread's records.

Each order executes inside its own cancel scope, so cancelling one
(``handle.cancel()``, a deadline, a client that went away) cancels exactly that
order's subtree and leaves the actor and its siblings alone. An order never
raises into the runtime's task group: its outcome (result or exception) is
delivered to its :class:`RunHandle`, so one failing run cannot cancel the others.

A thread actor keeps its thread's state in memory between runs. With a
checkpointer it also remembers where its last run left the thread (the head,
the ``seq`` of the newest record, and when its first record was stored); when
the next run's lease reports otherwise, someone else (another runtime, event
loop or process) wrote the thread meanwhile, or deleted and wrote it anew, and
the run reads the thread again from its checkpoint. An operation of its own (a
rollback, a delete) makes it forget both.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._core.logs import get_logger
from .._core.pacing import Pacer
from ..budget import BudgetReport
from ..errors import RunCancelled
from ..events import Event, RunFinished
from ..messages import Usage
from ..persistence import Checkpointer, ThreadLease
from ..state import AgentResult, State
from ._background import BackgroundTask, BackgroundTasks, collected_update
from ._journal import ThreadMark
from ._run_handle import (
    RunHandle,
    RunOptions,
    StartOptions,
    await_handle,
    deadline,
)
from ._session import execute_root
from ._spec import AgentSpec, RunInput
from ._threads import ThreadView, saver
from ._tool_call import stop_in

__all__ = [
    "MAILBOX_SIZE",
    "ActorHost",
    "CollectOrder",
    "OpOrder",
    "Order",
    "RunHandle",
    "RunOptions",
    "RunOrder",
    "StartOptions",
    "ThreadActor",
    "ThreadView",
    "await_handle",
    "deadline",
]

_log = get_logger("deepactors")

MAILBOX_SIZE = 64
"""Orders an actor holds before ``start`` waits: backpressure for a flooded thread."""


Operation = Callable[[Checkpointer, ThreadLease], Awaitable[dict[str, int]]]
"""An operation on a thread's saved records, run under the thread's lease."""


@dataclass(slots=True, kw_only=True)
class RunOrder:
    """A run request, as it sits in a thread actor's mailbox."""

    handle: RunHandle
    input: RunInput
    emit_stream: MemoryObjectSendStream[Event] | None
    emit: Callable[[Event], None] | None  # the stream's send_nowait and/or on_event
    on_done: Callable[[RunHandle], None] | None = None
    # The run's own listeners and its tracer, apart (``emit`` calls both): a
    # background task's events go on to its starting run's tracer, and to the
    # listeners of whichever run of the thread is in progress.
    listen: Callable[[Event], None] | None = None
    trace: Callable[[Event], None] | None = None


@dataclass(slots=True, kw_only=True)
class OpOrder:
    """An operation on the thread's records (rollback, delete, head), as an order."""

    handle: RunHandle
    op: Operation
    forgets: bool  # whether it changes the records (the actor's state goes stale)


@dataclass(slots=True, kw_only=True)
class CollectOrder:
    """Fold background subagents that ended while the thread was idle into its state."""

    handle: RunHandle


Order = RunOrder | OpOrder | CollectOrder


class ActorHost(Protocol):
    """What a thread actor needs of the runtime that hosts it."""

    @property
    def idle_timeout(self) -> float: ...

    @property
    def pacer(self) -> Pacer | None: ...

    @property
    def keeps_background(self) -> bool:
        """Whether its actors outlive the run in progress (not a one-call runtime)."""
        ...

    def in_progress(self) -> contextlib.AbstractContextManager[None]: ...

    def start_soon(self, work: Callable[[], Coroutine[object, object, None]]) -> None:
        """Start ``work`` in the group the runtime's actors live in."""
        ...

    def forget(self, actor: ThreadActor) -> None: ...


@dataclass(slots=True, kw_only=True, eq=False)
class ThreadActor:
    """Owns one thread's state; executes that thread's orders one at a time."""

    host: ActorHost
    spec: AgentSpec
    thread_id: str | None
    key: tuple[int, str] | None
    mailbox: MemoryObjectSendStream[Order] | None = None
    state: State | None = None
    mark: ThreadMark | None = None  # where this actor's last run left the thread
    running: bool = False
    queued: int = 0
    background: BackgroundTasks | None = None
    collect_queued: bool = False
    # Counts the orders taken: a read that saw no order start meanwhile may be
    # kept (``view``) until the next one (see ThreadHandle.view).
    generation: int = 0
    view: ThreadView | None = None

    async def serve(self, receive: MemoryObjectReceiveStream[Order]) -> None:
        """Take orders until the mailbox closes or the actor is idle too long."""
        try:
            await self._serve(receive)
        finally:
            if self.background is not None:
                # Nothing outlives its actor: a background subagent still
                # working when the actor leaves (its runtime closing) stops.
                self.background.cancel_all()
                # It calls back into this actor: dropped, so the pair is freed
                # by reference counting, not left for the cycle collector.
                self.background = None
            self.host.forget(self)
            # Orders this actor will never execute (it was cancelled, the
            # runtime closing, before it took them): each is answered as
            # cancelled, so nobody waits for ever on its handle or its on_done.
            while True:
                try:
                    order = receive.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                self.queued -= 1
                error = RunCancelled(f"run {order.handle.run_id} never ran: its runtime closed")
                answer(order, None, error)
            receive.close()

    async def _serve(self, receive: MemoryObjectReceiveStream[Order]) -> None:
        idle = self.host.idle_timeout if self.key is not None else math.inf
        while True:
            order = None
            # Only the wait for an order is timed: a run may take as long as it needs.
            with anyio.move_on_after(idle):
                try:
                    order = await receive.receive()
                except anyio.EndOfStream:
                    return
            if order is None:
                # Idle past the timeout: leave, unless background subagents
                # still work for it. No await between the check and the
                # removal, so no order can slip into a mailbox nobody reads.
                if self.queued == 0 and (self.background is None or not self.background.running):
                    return
                continue
            self.queued -= 1
            await self._execute(order)

    async def _execute(self, order: Order) -> None:
        handle = order.handle
        self.running = True
        self.generation += 1
        self.view = None  # what the order changes is read again
        result: AgentResult | None = None
        error: BaseException | None = None
        try:
            with anyio.CancelScope(deadline=handle.deadline) as scope:
                handle._scope = scope
                if handle._cancelled:
                    scope.cancel()
                try:
                    if isinstance(order, RunOrder):
                        result = await self._run(order)
                    elif isinstance(order, CollectOrder):
                        result = await self._collect(order)
                    else:
                        result = await self._operate(order)
                except (Exception, KeyboardInterrupt, SystemExit) as exc:
                    # Supervision: the failure goes to whoever awaits the handle,
                    # never into the runtime's task group. A KeyboardInterrupt or
                    # SystemExit from a tool reaches the caller bare (see StopRequested).
                    error = stop_in(exc) or exc
            if scope.cancelled_caught:
                if handle._cancelled:
                    error = RunCancelled(f"run {handle.run_id} on {handle.path!r} was cancelled")
                else:
                    error = TimeoutError(f"run on {handle.path!r} passed its deadline")
        finally:
            self.running = False
            if self.background is not None:
                self.background.end_run()
                if not isinstance(order, CollectOrder):
                    # Tasks that ended after the run's last model call (one
                    # that failed to collect is not retried in a loop).
                    self._collect_later()
            if result is None and error is None:
                # Cancelled from outside (the runtime is closing): tell the waiter.
                error = RunCancelled(f"run {handle.run_id} stopped: its runtime closed")
            answer(order, result, error)

    async def _run(self, order: RunOrder) -> AgentResult:
        handle = order.handle
        pacer = self.host.pacer
        if pacer is not None and pacer.due():
            # A run's start (its state, hooks and first model request) is a step
            # too: a burst of new runs starts in slices, behind what waits
            # already (and a server's requests go ahead of them).
            await pacer.wait()
        # Forgotten first: after a run that fails half-way the head is unknown,
        # and the next run reads the thread again from its checkpoint (without
        # one, the state kept here is all there is, so it stays as the failed
        # run left it).
        known, self.mark = self.mark, None

        def opened(head_before: int) -> None:
            handle.head_before = head_before

        def spent(usage: Usage | None, report: BudgetReport | None) -> None:
            handle.usage, handle.budget_report = usage, report

        tasks = None
        if self.spec.starts_background:
            # Only an agent that can start background tasks keeps a registry:
            # the rest (most, and every subagent of a fan-out) skip it all.
            tasks = self._tasks()
            tasks.begin_run(handle.run_id, handle.deadline, order.listen, order.trace)
            # A partial, not a closure over the handle: no cycle through it.
            handle._on_cancel = functools.partial(tasks.cancel_run, handle.run_id)
        with self.host.in_progress():
            result, self.state, self.mark = await execute_root(
                self.spec,
                self.state,
                order.input,
                run_id=handle.run_id,
                thread_id=self.thread_id,
                emit=order.emit,
                known=known,
                pacer=pacer,
                opened=opened,
                spent=spent,
                background=tasks,
                keeps_background=self.key is not None and self.host.keeps_background,
            )
        return result

    def _tasks(self) -> BackgroundTasks:
        if self.background is None:
            self.background = BackgroundTasks(self.host.start_soon, on_end=self._task_ended)
        return self.background

    def _task_ended(self, task: BackgroundTask) -> None:
        # A run in progress collects it before its next model call (or this
        # actor after that run); an idle thread is sent an order to.
        if not self.running:
            self._collect_later()

    def _collect_later(self) -> None:
        """Queue a :class:`CollectOrder` if the thread has ended tasks to fold in."""
        tasks = self.background
        if (
            tasks is None
            or self.key is None
            or self.mailbox is None
            or self.collect_queued
            or not tasks.uncollected(self.spec.name)
        ):
            return
        handle = RunHandle._create(path=self.spec.name, thread_id=self.thread_id, deadline=math.inf)
        try:
            self.mailbox.send_nowait(CollectOrder(handle=handle))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # a full mailbox: the thread's next run collects them instead
        self.queued += 1
        self.collect_queued = True

    async def _collect(self, order: CollectOrder) -> AgentResult:
        """Fold what ended background tasks did into the thread, one update each."""
        self.collect_queued = False
        tasks = self.background
        result = AgentResult()
        # Until none is left: a task that ends while this order runs is
        # folded in by it too (no await between the last look and the end).
        while tasks is not None and (ended := tasks.uncollected(self.spec.name)):
            task = ended[0]
            run_input = RunInput(values=collected_update(task), update_only=True)
            inner = RunOrder(handle=order.handle, input=run_input, emit_stream=None, emit=None)
            result = await self._run(inner)
            task.collected = True
        return result

    async def _operate(self, order: OpOrder) -> AgentResult:
        checkpointer = saver(self.spec)
        assert self.thread_id is not None  # operations go to thread actors only
        async with checkpointer.lease(self.thread_id) as lease:
            if order.forgets:
                # Whatever happens next, the state kept here may no longer be
                # the thread's: the next run reads it again.
                self.state, self.mark = None, None
                if self.background is not None:
                    # A deleted or rolled-back thread's tasks belong to a
                    # history it no longer has: stopped, and never folded in.
                    self.background.drop_all()
            return AgentResult(await order.op(checkpointer, lease))


def answer(order: Order, result: AgentResult | None, error: BaseException | None) -> None:
    """Tell everyone who listens to ``order`` how it ended."""
    handle = order.handle
    if isinstance(order, RunOrder):
        if order.emit is not None:
            order.emit(_finished_event(handle, result, error))
        if order.emit_stream is not None:
            order.emit_stream.close()
    handle._finish(result, error)
    on_done = order.on_done if isinstance(order, RunOrder) else None
    if on_done is not None:
        try:
            on_done(handle)
        except Exception:
            # A listener's bug must not take the runtime (and every other run
            # in it) down: said, and left there.
            _log.exception("on_done failed", path=handle.path, run_id=handle.run_id)


def _finished_event(
    handle: RunHandle, result: AgentResult | None, error: BaseException | None
) -> RunFinished:
    outcome: Literal["completed", "interrupted", "failed", "cancelled", "timed_out"]
    if error is None:
        outcome = "interrupted" if result and "__interrupt__" in result else "completed"
    elif isinstance(error, TimeoutError):
        outcome = "timed_out"
    elif isinstance(error, RunCancelled):
        outcome = "cancelled"
    else:
        outcome = "failed"
    return RunFinished(
        path=handle.path,
        run_id=handle.run_id,
        outcome=outcome,
        # Set as the run ends, whichever way: a failed run's trace and
        # metrics count what it spent too.
        usage=handle.usage if handle.usage is not None or result is None else result.usage,
        error=None if error is None else f"{type(error).__name__}: {error}",
    )

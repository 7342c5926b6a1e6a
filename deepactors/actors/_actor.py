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
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._core.logs import get_logger
from .._core.pacing import Pacer
from ..budget import Budget
from ..errors import InputError, RunCancelled
from ..events import Event, RunFinished
from ..messages import new_id
from ..persistence import Checkpointer, ThreadLease
from ..state import State
from ._journal import ThreadMark
from ._session import execute_root
from ._spec import AgentSpec, RunInput, prepare_input
from ._threads import saver
from ._tool_call import stop_in

__all__ = [
    "MAILBOX_SIZE",
    "ActorHost",
    "OpOrder",
    "Order",
    "RunHandle",
    "RunOptions",
    "RunOrder",
    "StartOptions",
    "ThreadActor",
    "await_handle",
    "deadline",
]

_log = get_logger("deepactors")

MAILBOX_SIZE = 64
"""Orders an actor holds before ``start`` waits: backpressure for a flooded thread."""


class RunHandle:
    """A run in progress: await its result, read its events, or cancel it.

    Attributes:
        path: The actor path of the run's root agent.
        run_id: Unique id of the run.
        thread_id: The thread it runs on, if any.
        events: The run's event stream, when it was started with ``stream=True``.
        head_before: The ``seq`` of the thread's newest saved record when the run
            took the thread's lease (0: none), so undoing the run means going
            back to it; None until then, and for a thread that is not saved.
    """

    def __init__(
        self,
        *,
        path: str,
        thread_id: str | None,
        deadline: float,
        events: MemoryObjectReceiveStream[Event] | None = None,
    ) -> None:
        self.path = path
        self.run_id = new_id()
        self.thread_id = thread_id
        self.deadline = deadline
        self.events = events
        self.head_before: int | None = None
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        self._done = anyio.Event()
        self._result: dict[str, Any] | None = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        """Whether the run has ended (in any way)."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Cancel the run and everything it started. Safe to call at any time, repeatedly."""
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    async def wait(self) -> None:
        """Wait until the run has ended, without raising its error."""
        await self._done.wait()

    async def result(self) -> dict[str, Any]:
        """Wait for the run and return its final state.

        Raises:
            RunCancelled: The run was cancelled through its handle.
            TimeoutError: The run passed its deadline.
            Exception: Whatever the run raised.
        """
        await self._done.wait()
        return self.result_nowait()

    def result_nowait(self) -> dict[str, Any]:
        """The final state of a run that has ended, without waiting.

        Raises:
            anyio.WouldBlock: The run has not ended yet.
            RunCancelled: The run was cancelled through its handle.
            TimeoutError: The run passed its deadline.
            Exception: Whatever the run raised.
        """
        if not self._done.is_set():
            raise anyio.WouldBlock
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def _finish(self, result: dict[str, Any] | None, error: BaseException | None) -> None:
        if not self._done.is_set():
            self._result, self._error = result, error
            self._done.set()


class StartOptions(TypedDict, total=False):
    """How to start a run (the keywords of :meth:`Runtime.start` and ``ThreadHandle.start``).

    Attributes:
        timeout: Seconds for the run, the wait in the thread's queue included.
        context: What hooks and tools read as ``run.context``, checked against
            the agent's ``context_schema``.
        budget: Limits for the run and every subagent under it
            (``result["budget"]`` reports what was spent).
        stream: Keep the run's events for :attr:`RunHandle.events`.
        on_event: Called with each of the run's events as it happens, in the
            task that emits it (the last is :class:`~deepactors.events.RunFinished`):
            for a listener that dispatches events itself (a server's
            subscribers), with no stream and no task of its own in between. It
            must not block or raise.
        on_done: Called once with the handle when the run has ended (its result
            or error set), in the actor's task: for a caller that records how
            runs end without a task awaiting each. It must not block; an error
            it raises is logged.
    """

    timeout: float | None
    context: object
    budget: Budget | None
    stream: bool
    on_event: Callable[[Event], None] | None
    on_done: Callable[[RunHandle], None] | None


_OPTION_NAMES = frozenset(StartOptions.__annotations__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What the runtime needs to queue a validated run: :class:`StartOptions`
    less what went into its :class:`RunInput` (the context and the budget)."""

    timeout: float | None = None
    stream: bool = False
    on_event: Callable[[Event], None] | None = None
    on_done: Callable[[RunHandle], None] | None = None

    @classmethod
    def split(
        cls, spec: AgentSpec, input: object, thread_id: str | None, options: StartOptions
    ) -> tuple[RunInput, RunOptions]:
        """Validate ``input`` with the options that belong to it; keep the rest.

        Raises:
            InputError: The input or an option is invalid.
            TypeError: An unknown option.
        """
        if not options.keys() <= _OPTION_NAMES:
            extra = ", ".join(sorted(options.keys() - _OPTION_NAMES))
            raise TypeError(f"unknown run option(s): {extra}")
        run_input = prepare_input(
            spec,
            input,
            thread_id,
            context=options.get("context"),
            budget=options.get("budget"),
        )
        return run_input, cls(
            timeout=options.get("timeout"),
            stream=options.get("stream", False),
            on_event=options.get("on_event"),
            on_done=options.get("on_done"),
        )


def deadline(timeout: float | None) -> float:
    """The loop-clock time ``timeout`` seconds from now (``inf`` for None).

    Raises:
        InputError: ``timeout`` is not a number of seconds.
    """
    if timeout is None:
        return math.inf
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout != timeout:
        raise InputError(f"timeout must be a number of seconds or None, not {timeout!r}")
    return anyio.current_time() + max(0.0, float(timeout))


async def await_handle(handle: RunHandle) -> dict[str, Any]:
    """Wait for a run's result; if the caller is cancelled, cancel the run first.

    The run is awaited in that case, so nothing of it outlives the caller.
    """
    try:
        return await handle.result()
    except BaseException:
        if not handle.done:
            # The caller was cancelled: take the run down with it, and wait for
            # its cleanup so that nothing of it outlives this call.
            handle.cancel()
            with anyio.CancelScope(shield=True):
                await handle.wait()
        raise


Operation = Callable[[Checkpointer, ThreadLease], Awaitable[dict[str, Any]]]
"""An operation on a thread's saved records, run under the thread's lease."""


@dataclass(slots=True, kw_only=True)
class RunOrder:
    """A run request, as it sits in a thread actor's mailbox."""

    handle: RunHandle
    input: RunInput
    emit_stream: MemoryObjectSendStream[Event] | None
    emit: Callable[[Event], None] | None  # the stream's send_nowait and/or on_event
    on_done: Callable[[RunHandle], None] | None = None


@dataclass(slots=True, kw_only=True)
class OpOrder:
    """An operation on the thread's records (rollback, delete, head), as an order."""

    handle: RunHandle
    op: Operation
    forgets: bool  # whether it changes the records (the actor's state goes stale)


Order = RunOrder | OpOrder


class ActorHost(Protocol):
    """What a thread actor needs of the runtime that hosts it."""

    @property
    def idle_timeout(self) -> float: ...

    @property
    def pacer(self) -> Pacer | None: ...

    def in_progress(self) -> contextlib.AbstractContextManager[None]: ...

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

    async def serve(self, receive: MemoryObjectReceiveStream[Order]) -> None:
        """Take orders until the mailbox closes or the actor is idle too long."""
        try:
            await self._serve(receive)
        finally:
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
                # Idle past the timeout: leave. No await between the check and
                # the removal, so no order can slip into a mailbox nobody reads.
                if self.queued == 0:
                    return
                continue
            self.queued -= 1
            await self._execute(order)

    async def _execute(self, order: Order) -> None:
        handle = order.handle
        self.running = True
        result: dict[str, Any] | None = None
        error: BaseException | None = None
        try:
            with anyio.CancelScope(deadline=handle.deadline) as scope:
                handle._scope = scope
                if handle._cancelled:
                    scope.cancel()
                try:
                    if isinstance(order, RunOrder):
                        result = await self._run(order)
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
            if result is None and error is None:
                # Cancelled from outside (the runtime is closing): tell the waiter.
                error = RunCancelled(f"run {handle.run_id} stopped: its runtime closed")
            answer(order, result, error)

    async def _run(self, order: RunOrder) -> dict[str, Any]:
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
            )
        return result

    async def _operate(self, order: OpOrder) -> dict[str, Any]:
        checkpointer = saver(self.spec)
        assert self.thread_id is not None  # operations go to thread actors only
        async with checkpointer.lease(self.thread_id) as lease:
            if order.forgets:
                # Whatever happens next, the state kept here may no longer be
                # the thread's: the next run reads it again.
                self.state, self.mark = None, None
            return await order.op(checkpointer, lease)


def answer(order: Order, result: dict[str, Any] | None, error: BaseException | None) -> None:
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
    handle: RunHandle, result: Mapping[str, Any] | None, error: BaseException | None
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
        usage=result.get("usage") if result else None,
        error=None if error is None else f"{type(error).__name__}: {error}",
    )

"""The actor runtime: one actor per conversation thread, each with a mailbox.

``async with open_runtime() as rt:`` opens a task group that hosts actors. A run
on a thread is an order sent to that thread's actor; the actor processes its
orders one at a time, so two runs on the same thread queue instead of
interleaving on the same state. Each run executes inside its own cancel scope,
so cancelling one (``handle.cancel()``, a deadline, a client that went away)
cancels exactly that run's subtree and leaves the actor and its siblings alone.

A run never raises into the runtime's task group: its outcome (result or
exception) is delivered to its :class:`RunHandle`, so one failing run cannot
cancel the others.

One rule serializes the runs of a thread: a thread actor executes an order
only while it holds its thread's turn in this event loop (:class:`_Turn`).
Inside one runtime the mailbox already orders them; the turn keeps runs of the
same agent and thread that arrive through different runtimes (each call without
a runtime opens its own) from interleaving too, in arrival order. Across event
loops and processes the checkpointer's thread lease serializes them.

A thread actor keeps its thread's state in memory between runs. With a
checkpointer it also remembers the thread's head (the ``seq`` of the newest
record) as its last run left it; when the next run's lease reports another head,
someone else (another actor, runtime, event loop or process) ran the thread
meanwhile, and the run reads the thread again from its checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._core.pacing import DEFAULT_QUANTUM, Pacer
from ..budget import Budget
from ..errors import InputError, RunCancelled, RuntimeClosed
from ..events import Event, RunFinished
from ..messages import new_id
from ..state import State
from ._heap import deferred_collections, frozen_heap, run_in_progress
from ._session import execute_root
from ._spec import AgentSpec, HasSpec, RunInput, prepare_input
from ._tool_call import stop_in

__all__ = ["ActorStatistics", "RunHandle", "Runtime", "await_handle", "open_runtime"]

_log = structlog.get_logger("deepactors")

MAILBOX_SIZE = 64
"""Orders an actor holds before ``start`` waits: backpressure for a flooded thread."""


class RunHandle:
    """A run in progress: await its result, read its events, or cancel it.

    Attributes:
        path: The actor path of the run's root agent.
        run_id: Unique id of the run.
        thread_id: The thread it runs on, if any.
        events: The run's event stream, when it was started with ``stream=True``.
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorStatistics:
    """A snapshot of a runtime's actors.

    Attributes:
        actors: Thread actors alive.
        queued: Orders waiting in mailboxes.
        running: Runs executing now.
    """

    actors: int
    queued: int
    running: int


@dataclass(slots=True, kw_only=True)
class _Order:
    """A run request, as it sits in a thread actor's mailbox."""

    handle: RunHandle
    input: RunInput
    emit_stream: MemoryObjectSendStream[Event] | None
    emit: Callable[[Event], None] | None  # the stream's send_nowait and/or on_event
    on_done: Callable[[RunHandle], None] | None = None


class _Turn:
    """The turn of one (event loop, agent, thread): who may run it now."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = anyio.Lock()  # FIFO: runs take turns in arrival order


_TURNS: weakref.WeakValueDictionary[tuple[object, int, str], _Turn] = weakref.WeakValueDictionary()
"""The turns in use; an entry leaves when no actor or waiting run holds it."""


def _turn_for(spec: AgentSpec, thread_id: str) -> _Turn:
    # The loop's token in the key: a lock belongs to one event loop, and threads
    # running loops of their own must not share one. id(spec) cannot be reused
    # while the entry lives: whoever holds the turn holds the spec too.
    key = (anyio.lowlevel.current_token(), id(spec), thread_id)
    turn = _TURNS.get(key)
    if turn is None:
        turn = _TURNS[key] = _Turn()
    return turn


@dataclass(slots=True, kw_only=True, eq=False)
class _ThreadActor:
    """Owns one thread's state; runs that thread's orders one at a time."""

    runtime: Runtime
    spec: AgentSpec
    thread_id: str | None
    key: tuple[int, str] | None
    mailbox: MemoryObjectSendStream[_Order] | None = None
    turn: _Turn | None = None
    state: State | None = None
    head: int | None = None  # the thread's head as this actor's last run left it
    running: bool = False
    queued: int = 0

    async def serve(self, receive: MemoryObjectReceiveStream[_Order]) -> None:
        try:
            await self._serve(receive)
        finally:
            self.runtime._anonymous.discard(self)
            # Orders this actor will never run (it was cancelled, the runtime
            # closing, before it took them): each is answered as cancelled, so
            # nobody waits for ever on its handle or its on_done.
            while True:
                try:
                    order = receive.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                self.queued -= 1
                error = RunCancelled(f"run {order.handle.run_id} never ran: its runtime closed")
                _answer(order, None, error)
            receive.close()

    async def _serve(self, receive: MemoryObjectReceiveStream[_Order]) -> None:
        idle = self.runtime.idle_timeout if self.key is not None else math.inf
        # (The mailbox is closed by serve, once what is left in it is answered.)
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
                    self.runtime._forget(self)
                    return
                continue
            self.queued -= 1
            await self._execute(order)

    async def _execute(self, order: _Order) -> None:
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
                    pacer = self.runtime.pacer
                    if pacer is not None and pacer.due():
                        # A run's start (its state, hooks and first model
                        # request) is a step too: a burst of new runs starts in
                        # slices, behind what waits already (and a server's
                        # requests go ahead of them).
                        await pacer.wait()
                    async with _hold(self.turn):
                        # Forgotten first: after a run that fails half-way the head
                        # is unknown, and the next run reads the thread again from
                        # its checkpoint (without one, the state kept here is all
                        # there is, so it stays as the failed run left it).
                        head, self.head = self.head, None
                        with self.runtime._in_progress():
                            result, self.state, self.head = await execute_root(
                                self.spec,
                                self.state,
                                order.input,
                                run_id=handle.run_id,
                                thread_id=self.thread_id,
                                emit=order.emit,
                                known_head=head,
                                pacer=pacer,
                            )
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
            _answer(order, result, error)


def _answer(order: _Order, result: dict[str, Any] | None, error: BaseException | None) -> None:
    """Tell everyone who listens to ``order`` how its run ended."""
    handle = order.handle
    if order.emit is not None:
        order.emit(_finished_event(handle, result, error))
    if order.emit_stream is not None:
        order.emit_stream.close()
    handle._finish(result, error)
    if order.on_done is not None:
        try:
            order.on_done(handle)
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


class Runtime:
    """Hosts actors in a task group. Get one with :func:`open_runtime`.

    Args:
        task_group: The group actors live in.
        idle_timeout: Seconds a thread actor with nothing to do stays alive
            (keeping its state in memory) before it exits.
    """

    def __init__(
        self,
        task_group: TaskGroup,
        *,
        idle_timeout: float = 300.0,
        defer_gc: bool = False,
        pacer: Pacer | None = None,
    ) -> None:
        self._tg = task_group
        self.idle_timeout = idle_timeout
        self.pacer = pacer
        self._defer_gc = defer_gc
        self._actors: dict[tuple[int, str], _ThreadActor] = {}
        self._closed = False
        self._anonymous: set[_ThreadActor] = set()

    def _in_progress(self) -> contextlib.AbstractContextManager[None]:
        return run_in_progress() if self._defer_gc else contextlib.nullcontext()

    def statistics(self) -> ActorStatistics:
        """Counts of actors, queued orders and running runs."""
        actors = [*self._actors.values(), *self._anonymous]
        return ActorStatistics(
            actors=len(actors),
            queued=sum(a.queued for a in actors),
            running=sum(1 for a in actors if a.running),
        )

    async def start(
        self,
        agent: HasSpec,
        input: object,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: object = None,
        budget: Budget | None = None,
        stream: bool = False,
        on_event: Callable[[Event], None] | None = None,
        on_done: Callable[[RunHandle], None] | None = None,
    ) -> RunHandle:
        """Validate the input and queue a run; return its handle at once.

        Waits only when the thread's mailbox is full (backpressure).

        Args:
            agent: The agent to run (anything with a ``spec``: a ``DeepAgent``).
            input: What :meth:`DeepAgent.ainvoke` takes.
            thread_id: The thread to run on; runs of one thread queue.
            timeout: Seconds for the run, the wait in the queue included.
            context: What hooks and tools read as ``run.context``, checked
                against the agent's ``context_schema``.
            budget: Limits for the run and every subagent under it
                (``result["budget"]`` reports what was spent).
            stream: Keep the run's events for :attr:`RunHandle.events`.
            on_event: Called with each of the run's events as it happens, in the
                task that emits it (the last is :class:`~deepactors.events.RunFinished`):
                for a listener that dispatches events itself (a server's
                subscribers), with no stream and no task of its own in between.
                It must not block or raise.
            on_done: Called once with the handle when the run has ended (its
                result or error set), in the actor's task: for a caller that
                records how runs end without a task awaiting each. It must not
                block; an error it raises is logged.

        Raises:
            InputError: The input or an option is invalid (nothing was started).
            RuntimeClosed: The runtime is closing.
        """
        actor, order = self._order(
            agent, input, thread_id, timeout, context, budget, stream, on_event, on_done
        )
        if actor.mailbox is not None and actor.key is not None:
            actor.queued += 1
            await actor.mailbox.send(order)
            return order.handle
        return self._queue(actor, order)

    def start_nowait(
        self,
        agent: HasSpec,
        input: object,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: object = None,
        budget: Budget | None = None,
        stream: bool = False,
        on_event: Callable[[Event], None] | None = None,
        on_done: Callable[[RunHandle], None] | None = None,
    ) -> RunHandle:
        """:meth:`start`, without waiting: for a caller that cannot await.

        A run without a thread is always queued at once.

        Raises:
            anyio.WouldBlock: The thread's mailbox is full (nothing was queued;
                :meth:`start` waits for room).
            InputError: The input or an option is invalid (nothing was started).
            RuntimeClosed: The runtime is closing.
        """
        actor, order = self._order(
            agent, input, thread_id, timeout, context, budget, stream, on_event, on_done
        )
        if actor.mailbox is not None and actor.key is not None:
            actor.mailbox.send_nowait(order)  # WouldBlock when full: nothing queued
            actor.queued += 1
            return order.handle
        return self._queue(actor, order)

    def _order(
        self,
        agent: HasSpec,
        input: object,
        thread_id: str | None,
        timeout: float | None,
        context: object,
        budget: Budget | None,
        stream: bool,
        on_event: Callable[[Event], None] | None,
        on_done: Callable[[RunHandle], None] | None,
    ) -> tuple[_ThreadActor, _Order]:
        """A run's order, and the actor that will serve it (a new one-shot actor,
        not started yet, for a run without a thread)."""
        if self._closed:
            raise RuntimeClosed("this runtime is closed; open a new one with open_runtime()")
        spec = agent.spec
        run_input = prepare_input(spec, input, thread_id, context=context, budget=budget)
        deadline = _deadline(timeout)
        send: MemoryObjectSendStream[Event] | None = None
        receive: MemoryObjectReceiveStream[Event] | None = None
        if stream:
            # Unbounded: emitting must never block the agent (or need an await on
            # its hot path); the consumer's pace is its own business.
            send, receive = anyio.create_memory_object_stream[Event](math.inf)
        handle = RunHandle(path=spec.name, thread_id=thread_id, deadline=deadline, events=receive)
        emit: Callable[[Event], None] | None = None
        if send is not None and on_event is not None:
            put = send.send_nowait

            def emit(event: Event) -> None:
                put(event)
                on_event(event)

        elif send is not None:
            emit = send.send_nowait
        else:
            emit = on_event
        order = _Order(handle=handle, input=run_input, emit_stream=send, emit=emit, on_done=on_done)
        if thread_id is None:
            # No thread: a one-shot actor that exits after this order.
            return _ThreadActor(runtime=self, spec=spec, thread_id=None, key=None), order
        actor = self._actor_for(spec, thread_id)
        assert actor.mailbox is not None
        return actor, order

    def _queue(self, actor: _ThreadActor, order: _Order) -> RunHandle:
        """Start a one-shot actor with ``order`` as its only order."""
        mailbox = self._spawn(actor)
        actor.queued += 1
        mailbox.send_nowait(order)
        mailbox.close()
        return order.handle

    def _spawn(self, actor: _ThreadActor) -> MemoryObjectSendStream[_Order]:
        """Start ``actor``'s task; return its mailbox, open at once.

        The mailbox is made here, not by the task: no round trip through the
        loop (``TaskGroup.start``) before the first order can be queued.
        """
        send, receive = anyio.create_memory_object_stream[_Order](MAILBOX_SIZE)
        actor.mailbox = send
        if actor.key is None:
            self._anonymous.add(actor)
        self._tg.start_soon(actor.serve, receive)
        return send

    def _actor_for(self, spec: AgentSpec, thread_id: str) -> _ThreadActor:
        key = (id(spec), thread_id)
        actor = self._actors.get(key)
        if actor is None:
            # The actor holds the spec, so id(spec) cannot be reused while the key lives.
            actor = _ThreadActor(
                runtime=self,
                spec=spec,
                thread_id=thread_id,
                key=key,
                turn=_turn_for(spec, thread_id),
            )
            self._actors[key] = actor
            self._spawn(actor)
        return actor

    def _forget(self, actor: _ThreadActor) -> None:
        if actor.key is not None and self._actors.get(actor.key) is actor:
            del self._actors[actor.key]
        if actor.mailbox is not None:
            actor.mailbox.close()

    async def ainvoke(self, agent: HasSpec, input: object, **kwargs: Any) -> dict[str, Any]:
        """Run ``agent`` on ``input`` under this runtime and return the final state.

        If the caller is cancelled, the run is cancelled too (and awaited, so
        nothing of it is alive when this returns).
        """
        handle = await self.start(agent, input, **kwargs)
        return await await_handle(handle)

    def _close(self) -> None:
        self._closed = True
        for actor in list(self._actors.values()):
            if actor.mailbox is not None:
                actor.mailbox.close()
        self._actors.clear()


@asynccontextmanager
async def _hold(turn: _Turn | None) -> AsyncIterator[None]:
    if turn is None:
        yield
        return
    async with turn.lock:
        yield


def _deadline(timeout: float | None) -> float:
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


@asynccontextmanager
async def open_runtime(
    *,
    idle_timeout: float = 300.0,
    pacing: float | None = DEFAULT_QUANTUM,
    freeze_heap: bool = False,
    defer_gc: bool = False,
) -> AsyncIterator[Runtime]:
    """Open a runtime whose actors live until the ``async with`` block ends.

    Meant for a server's lifespan: each request's run is an actor under it, and a
    run on a busy thread queues behind the one in progress. Leaving the block
    waits for the runs in progress to finish; cancel them first to stop sooner.

    Args:
        idle_timeout: Seconds a thread actor with nothing to do stays alive.
        pacing: Seconds of agent steps the runtime runs per event-loop turn
            before the loop gets to poll its sockets and fire its timers (see
            :mod:`deepactors._core.pacing`): with 10,000 subagents whose model calls
            return at once, a 5 ms timer beside them fires ~10 ms late instead
            of seconds, and a server keeps answering. Steps past the slice wait
            in FIFO order. None turns pacing off.
        freeze_heap: Opt in to moving every object alive when the runtime opens
            (modules, the model SDK, compiled agents, tool schemas) out of the
            cyclic garbage collector's sight until it closes (``gc.collect()``
            then ``gc.freeze()``; ``gc.unfreeze()`` when the last such runtime
            closes). Each full collection then walks only what runs create:
            importing the Anthropic SDK alone adds ~120,000 objects to every
            full pause. It changes a process-wide setting, hence off by default;
            open it after the app is built, and expect one full collection then.
        defer_gc: Opt in to deferring CPython's full (generation 2) collections
            while runs of this runtime are in progress: one that falls due then
            freezes what is alive (``gc.freeze()``) instead of walking it, and
            what was frozen is handed back (``gc.unfreeze()``) once no run is in
            progress, or after 30 s of deferring under constant load. A run
            leaves no reference cycle, so a fan-out's objects are freed by
            reference counting meanwhile; the collector's longest pause at
            10,000 concurrent subagents drops from ~0.4 s to a young
            collection's few ms. Cyclic garbage your own code makes waits for
            the next full collection (an explicit ``gc.collect()`` during a
            run finds nothing either), and the hand-back thaws whatever else
            was frozen (by ``gc.freeze()`` of your own) as well. Process-wide,
            hence off by default.
    """
    with contextlib.ExitStack() as stack:
        if freeze_heap:
            stack.enter_context(frozen_heap())
        if defer_gc:
            stack.enter_context(deferred_collections())
        pacer = None if pacing is None else Pacer(pacing)
        async with anyio.create_task_group() as system:
            if pacer is not None:
                system.start_soon(pacer.run)
            try:
                async with anyio.create_task_group() as tg:
                    rt = Runtime(tg, idle_timeout=idle_timeout, defer_gc=defer_gc, pacer=pacer)
                    try:
                        yield rt
                    finally:
                        rt._close()
            finally:
                # Every actor is gone: the pump has nothing left to pace.
                system.cancel_scope.cancel()

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
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..errors import RunCancelled, RuntimeClosed
from ..events import Event, RunFinished
from ..messages import new_id

if TYPE_CHECKING:
    from ..agent import DeepAgent

__all__ = ["ActorStatistics", "RunHandle", "Runtime", "open_runtime"]

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
    values: Mapping[str, Any]
    options: Mapping[str, Any]
    emit_stream: MemoryObjectSendStream[Event] | None


@dataclass(slots=True, kw_only=True, eq=False)
class _ThreadActor:
    """Owns one thread's state; runs that thread's orders one at a time."""

    runtime: Runtime
    agent: DeepAgent
    thread_id: str | None
    key: tuple[int, str] | None
    mailbox: MemoryObjectSendStream[_Order] | None = None
    state: Any = None
    running: bool = False
    queued: int = 0

    async def serve(self, *, task_status: TaskStatus[_ThreadActor]) -> None:
        send, receive = anyio.create_memory_object_stream[_Order](MAILBOX_SIZE)
        self.mailbox = send
        if self.key is None:
            self.runtime._anonymous.add(self)
        task_status.started(self)
        try:
            await self._serve(receive)
        finally:
            self.runtime._anonymous.discard(self)

    async def _serve(self, receive: MemoryObjectReceiveStream[_Order]) -> None:
        idle = self.runtime.idle_timeout if self.key is not None else math.inf
        async with receive:
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
                    result, self.state = await self.agent._run_order(
                        self.state, order.values, handle, order.options, order.emit_stream
                    )
                except Exception as exc:
                    # Supervision: the failure goes to whoever awaits the handle,
                    # never into the runtime's task group.
                    error = exc
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
            if order.emit_stream is not None:
                order.emit_stream.send_nowait(_finished_event(handle, result, error))
                order.emit_stream.close()
            handle._finish(result, error)


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

    def __init__(self, task_group: TaskGroup, *, idle_timeout: float = 300.0) -> None:
        self._tg = task_group
        self.idle_timeout = idle_timeout
        self._actors: dict[tuple[int, str], _ThreadActor] = {}
        self._closed = False
        self._anonymous: set[_ThreadActor] = set()

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
        agent: DeepAgent,
        input: Any,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        stream: bool = False,
        **options: Any,
    ) -> RunHandle:
        """Validate the input and queue a run; return its handle at once.

        Raises:
            InputError: The input is invalid (nothing was started).
            RuntimeClosed: The runtime is closing.
        """
        if self._closed:
            raise RuntimeClosed("this runtime is closed; open a new one with open_runtime()")
        values = agent._prepare_input(input, thread_id)
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        send: MemoryObjectSendStream[Event] | None = None
        receive: MemoryObjectReceiveStream[Event] | None = None
        if stream:
            # Unbounded: emitting must never block the agent (or need an await on
            # its hot path); the consumer's pace is its own business.
            send, receive = anyio.create_memory_object_stream[Event](math.inf)
        handle = RunHandle(path=agent.name, thread_id=thread_id, deadline=deadline, events=receive)
        order = _Order(handle=handle, values=values, options=options, emit_stream=send)
        if thread_id is None:
            # No thread: a one-shot actor that exits after this order.
            actor = _ThreadActor(runtime=self, agent=agent, thread_id=None, key=None)
            await self._tg.start(actor.serve)
            assert actor.mailbox is not None
            actor.queued += 1
            actor.mailbox.send_nowait(order)
            actor.mailbox.close()
            return handle
        actor = await self._actor_for(agent, thread_id)
        assert actor.mailbox is not None
        actor.queued += 1
        await actor.mailbox.send(order)
        return handle

    async def _actor_for(self, agent: DeepAgent, thread_id: str) -> _ThreadActor:
        key = (id(agent), thread_id)
        actor = self._actors.get(key)
        if actor is None:
            # The actor holds the agent, so id(agent) cannot be reused while the key lives.
            actor = _ThreadActor(runtime=self, agent=agent, thread_id=thread_id, key=key)
            self._actors[key] = actor
            await self._tg.start(actor.serve)
        return actor

    def _forget(self, actor: _ThreadActor) -> None:
        if actor.key is not None and self._actors.get(actor.key) is actor:
            del self._actors[actor.key]
        if actor.mailbox is not None:
            actor.mailbox.close()

    async def ainvoke(self, agent: DeepAgent, input: Any, **kwargs: Any) -> dict[str, Any]:
        """Run ``agent`` on ``input`` under this runtime and return the final state.

        If the caller is cancelled, the run is cancelled too (and awaited, so
        nothing of it is alive when this returns).
        """
        handle = await self.start(agent, input, **kwargs)
        return await _await_handle(handle)

    def _close(self) -> None:
        self._closed = True
        for actor in list(self._actors.values()):
            if actor.mailbox is not None:
                actor.mailbox.close()
        self._actors.clear()


async def _await_handle(handle: RunHandle) -> dict[str, Any]:
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
async def open_runtime(*, idle_timeout: float = 300.0) -> AsyncIterator[Runtime]:
    """Open a runtime whose actors live until the ``async with`` block ends.

    Meant for a server's lifespan: each request's run is an actor under it, and a
    run on a busy thread queues behind the one in progress. Leaving the block
    waits for the runs in progress to finish; cancel them first to stop sooner.
    """
    async with anyio.create_task_group() as tg:
        rt = Runtime(tg, idle_timeout=idle_timeout)
        try:
            yield rt
        finally:
            rt._close()

"""The actor runtime: hosts thread actors (see :mod:`._actor`) in a task group.

``async with open_runtime() as rt:`` opens a task group that hosts actors. A
run starts through a handle, and only through one: work on a thread goes
through its handle (``rt.thread(agent, thread_id)``): a run, a state update, a
rollback, a delete are orders to that thread's actor, which executes them one
at a time under the thread's lease. A run without a thread starts through
``rt.thread(agent)`` and gets a one-shot actor of its own.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, TypeVarTuple, Unpack, final, overload

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from .._core.pacing import DEFAULT_QUANTUM, Pacer
from .._core.public import NoPublicConstructor
from ..errors import RuntimeClosed
from ..persistence import ThreadInfo
from ..state import AgentResult
from ..tracing import Tracing
from ._actor import (
    MAILBOX_SIZE,
    Order,
    RunHandle,
    RunOptions,
    RunOrder,
    StartOptions,
    ThreadActor,
    await_handle,
)
from ._handle import OneShotHandle, ThreadHandle
from ._heap import deferred_collections, frozen_heap, run_in_progress
from ._orders import make_order, unqueued
from ._spec import AgentSpec, HasSpec, RunInput, check_thread

__all__ = [
    "ActorStatistics",
    "RunHandle",
    "RunOptions",
    "Runtime",
    "SharedKey",
    "StartOptions",
    "await_handle",
    "current_runtime",
    "open_runtime",
]

T = TypeVar("T")
PosArgsT = TypeVarTuple("PosArgsT")


@final
class SharedKey(Generic[T]):
    """A typed key for an object one runtime shares with all its actors: ``rt.shared(KEY)``.

    For resources that outlive a run, such as a connection to a tool server.

    Args:
        name: Shown in reprs and errors.
        factory: Makes the value the first time the runtime is asked for it; it
            gets a task group that lives as long as the runtime (cancelled when
            it closes, after its last actor), for the tasks the value owns. A
            task there must not let an exception escape: it would end the runtime.
    """

    __slots__ = ("factory", "name")

    def __init__(self, name: str, factory: Callable[[TaskGroup], T]) -> None:
        self.name = name
        self.factory = factory

    def __repr__(self) -> str:
        return f"SharedKey({self.name!r})"


# Set in every actor's task (and so in its subagents'): a tool finds the runtime
# hosting it without each layer in between passing it along.
_CURRENT: ContextVar[Runtime | None] = ContextVar("deepactors_runtime", default=None)


def _tracing(tracing: Tracing | bool) -> Tracing | None:
    if isinstance(tracing, Tracing):
        return tracing
    return Tracing() if tracing else None


def current_runtime() -> Runtime | None:
    """The runtime hosting the calling actor, or None outside any."""
    return _CURRENT.get()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ActorStatistics:
    """A snapshot of a runtime's actors.

    Attributes:
        actors: Thread actors alive.
        queued: Orders waiting in mailboxes.
        running: Orders executing now.
    """

    actors: int
    queued: int
    running: int


@final
class Runtime(metaclass=NoPublicConstructor):
    """Hosts actors in a task group. Get one with :func:`open_runtime`.

    Runs start through its handles: ``rt.thread(agent, thread_id)`` for a
    thread, ``rt.thread(agent)`` for a run that belongs to none.

    Args:
        task_group: The group actors live in.
        idle_timeout: Seconds a thread actor with nothing to do stays alive
            (keeping its state in memory) before it exits.

    Attributes:
        keeps_background: Whether a run's background subagents may keep
            working after the run ends (its thread actor owns them). False
            for a runtime opened for one call (``agent.ainvoke`` without
            ``runtime=``): a run there waits for its background subagents,
            since the runtime closes when the call returns.
    """

    _obtain = "open one with `async with open_runtime() as rt:`"

    def __init__(
        self,
        task_group: TaskGroup,
        *,
        idle_timeout: float = 300.0,
        defer_gc: bool = False,
        pacer: Pacer | None = None,
        system: TaskGroup | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._tg = task_group
        # None: no tracing at all (open_runtime(tracing=False)).
        self._tracing = tracing
        self._system = system if system is not None else task_group
        self._shared: dict[SharedKey[Any], Any] = {}
        self.idle_timeout = idle_timeout
        self.pacer = pacer
        self._defer_gc = defer_gc
        self._actors: dict[tuple[int, str], ThreadActor] = {}
        self._closed = False
        self._anonymous: set[ThreadActor] = set()
        self.keeps_background = True

    def in_progress(self) -> contextlib.AbstractContextManager[None]:
        """Held while a run executes (deferred collections, if asked for)."""
        return run_in_progress() if self._defer_gc else contextlib.nullcontext()

    def start_soon(
        self, work: Callable[[*PosArgsT], Coroutine[object, object, None]], *args: *PosArgsT
    ) -> None:
        """Start ``work(*args)`` in the group the runtime's actors live in."""
        # The new task copies the context as it is now: set, it names this runtime.
        token = _CURRENT.set(self)
        try:
            self._tg.start_soon(work, *args)
        finally:
            _CURRENT.reset(token)

    def shared(self, key: SharedKey[T]) -> T:
        """This runtime's value for ``key``, made by ``key.factory`` on first use.

        Raises:
            RuntimeClosed: The runtime is closing.
        """
        try:
            found: T = self._shared[key]
            return found
        except KeyError:
            if self._closed:
                raise RuntimeClosed(
                    "this runtime is closed; open a new one with open_runtime()"
                ) from None
            value = self._shared[key] = key.factory(self._system)
            return value

    def statistics(self) -> ActorStatistics:
        """Counts of actors, queued orders and running orders."""
        actors = [*self._actors.values(), *self._anonymous]
        return ActorStatistics(
            actors=len(actors),
            queued=sum(a.queued for a in actors),
            running=sum(1 for a in actors if a.running),
        )

    @overload
    def thread(self, agent: HasSpec, thread_id: str) -> ThreadHandle: ...

    @overload
    def thread(self, agent: HasSpec, thread_id: None = None) -> OneShotHandle: ...

    @overload
    def thread(self, agent: HasSpec, thread_id: str | None) -> ThreadHandle | OneShotHandle: ...

    def thread(self, agent: HasSpec, thread_id: str | None = None) -> ThreadHandle | OneShotHandle:
        """The handle runs of ``agent`` start through: one thread's, or (None) no thread's.

        With a ``thread_id``, everything done to the thread goes through the
        handle (runs, state updates, rollbacks, deletes, reads). Without one,
        each run the handle starts gets a one-shot actor of its own.

        Raises:
            InputError: ``thread_id`` is not a non-empty string (or None).
        """
        if thread_id is None:
            return OneShotHandle._create(self, agent.spec)
        check_thread(thread_id)
        return ThreadHandle._create(self, agent.spec, thread_id)

    async def start(
        self,
        agent: HasSpec,
        input: object,
        *,
        thread_id: str | None = None,
        **options: Unpack[StartOptions],
    ) -> RunHandle:
        """Deprecated: ``await rt.thread(agent, thread_id).start(input, ...)``."""
        _deprecated("rt.start(agent, input, thread_id=t)", "rt.thread(agent, t).start(input)")
        return await self.thread(agent, thread_id).start(input, **options)

    def start_nowait(
        self,
        agent: HasSpec,
        input: object,
        *,
        thread_id: str | None = None,
        **options: Unpack[StartOptions],
    ) -> RunHandle:
        """Deprecated: ``rt.thread(agent, thread_id).start_nowait(input, ...)``."""
        _deprecated(
            "rt.start_nowait(agent, input, thread_id=t)", "rt.thread(agent, t).start_nowait(input)"
        )
        return self.thread(agent, thread_id).start_nowait(input, **options)

    async def ainvoke(
        self,
        agent: HasSpec,
        input: object,
        *,
        thread_id: str | None = None,
        **options: Unpack[StartOptions],
    ) -> AgentResult:
        """Deprecated: ``await rt.thread(agent, thread_id).ainvoke(input, ...)``."""
        _deprecated("rt.ainvoke(agent, input, thread_id=t)", "rt.thread(agent, t).ainvoke(input)")
        return await self.thread(agent, thread_id).ainvoke(input, **options)

    async def _queue_run(
        self, spec: AgentSpec, thread_id: str | None, run_input: RunInput, options: RunOptions
    ) -> RunHandle:
        """Queue a validated run (for the handles: see ``ThreadHandle.start``)."""
        order = self._order(spec, thread_id, run_input, options)
        if thread_id is None:
            return self._one_shot(spec, order)
        try:
            await self._queue_order(spec, thread_id, order)
        except BaseException as exc:
            unqueued(order, exc)
            raise
        return order.handle

    def _queue_run_nowait(
        self, spec: AgentSpec, thread_id: str | None, run_input: RunInput, options: RunOptions
    ) -> RunHandle:
        """Queue a validated run without waiting (see ``ThreadHandle.start_nowait``)."""
        if thread_id is None:
            return self._one_shot(spec, self._order(spec, thread_id, run_input, options))
        # Room is checked before the order is made: a run refused for a full
        # mailbox (the server's quick start, which then waits for room and
        # orders it again) never starts a trace.
        actor = self._actor_for(spec, thread_id)
        mailbox = actor.mailbox
        assert mailbox is not None
        room = mailbox.statistics()
        if room.current_buffer_used >= room.max_buffer_size:
            raise anyio.WouldBlock
        order = self._order(spec, thread_id, run_input, options)
        try:
            mailbox.send_nowait(order)  # WouldBlock when full: nothing queued
        except BaseException as exc:
            unqueued(order, exc)
            raise
        actor.queued += 1
        return order.handle

    async def _queue_order(self, spec: AgentSpec, thread_id: str, order: Order) -> None:
        """Put an order in the thread actor's mailbox, waiting for room."""
        actor = self._actor_for(spec, thread_id)
        assert actor.mailbox is not None
        actor.queued += 1
        try:
            await actor.mailbox.send(order)
        except BaseException:
            actor.queued -= 1
            raise

    def _live_actor(self, spec: AgentSpec, thread_id: str) -> ThreadActor | None:
        """The thread's actor if it is alive (none is started for asking)."""
        return self._actors.get((id(spec), thread_id))

    def _order(
        self, spec: AgentSpec, thread_id: str | None, run_input: RunInput, options: RunOptions
    ) -> RunOrder:
        if self._closed:
            raise RuntimeClosed("this runtime is closed; open a new one with open_runtime()")
        return make_order(spec.name, thread_id, run_input, options, self._tracing)

    def _one_shot(self, spec: AgentSpec, order: RunOrder) -> RunHandle:
        """Start a one-shot actor (no thread) with ``order`` as its only order."""
        actor = ThreadActor(host=self, spec=spec, thread_id=None, key=None)
        mailbox = self._spawn(actor)
        actor.queued += 1
        mailbox.send_nowait(order)
        mailbox.close()
        return order.handle

    def _spawn(self, actor: ThreadActor) -> MemoryObjectSendStream[Order]:
        """Start ``actor``'s task; return its mailbox, open at once.

        The mailbox is made here, not by the task: no round trip through the
        loop (``TaskGroup.start``) before the first order can be queued.
        """
        send, receive = anyio.create_memory_object_stream[Order](MAILBOX_SIZE)
        actor.mailbox = send
        if actor.key is None:
            self._anonymous.add(actor)
        self.start_soon(actor.serve, receive)
        return send

    def _actor_for(self, spec: AgentSpec, thread_id: str) -> ThreadActor:
        if self._closed:
            raise RuntimeClosed("this runtime is closed; open a new one with open_runtime()")
        key = (id(spec), thread_id)
        actor = self._actors.get(key)
        if actor is None:
            # The actor holds the spec, so id(spec) cannot be reused while the key lives.
            actor = ThreadActor(host=self, spec=spec, thread_id=thread_id, key=key)
            self._actors[key] = actor
            self._spawn(actor)
        return actor

    def forget(self, actor: ThreadActor) -> None:
        """An actor has exited: no order may reach it any more."""
        self._anonymous.discard(actor)
        if actor.key is not None and self._actors.get(actor.key) is actor:
            del self._actors[actor.key]
        if actor.mailbox is not None:
            actor.mailbox.close()

    async def saved_threads(self, agent: HasSpec) -> list[ThreadInfo]:
        """Every thread ``agent``'s checkpointer holds records of (none without one)."""
        checkpointer = agent.spec.checkpointer
        return [] if checkpointer is None else await checkpointer.threads()

    def _close(self) -> None:
        self._closed = True
        for actor in list(self._actors.values()):
            if actor.mailbox is not None:
                actor.mailbox.close()
        self._actors.clear()


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated: runs start through a handle, {new}",
        DeprecationWarning,
        stacklevel=3,
    )


@asynccontextmanager
async def open_runtime(
    *,
    idle_timeout: float = 300.0,
    pacing: float | None = DEFAULT_QUANTUM,
    freeze_heap: bool = False,
    defer_gc: bool = False,
    tracing: Tracing | bool = True,
) -> AsyncIterator[Runtime]:
    """Open a runtime whose actors live until the ``async with`` block ends.

    Meant for a server's lifespan: each request's run is an actor under it, and a
    run on a busy thread queues behind the one in progress. Leaving the block
    waits for the runs in progress to finish; cancel them first to stop sooner.

    Args:
        idle_timeout: Seconds a thread actor with nothing to do stays alive.
        pacing: Seconds of agent steps the runtime runs per event-loop turn
            before the loop gets to poll its sockets and fire its timers (see
            :mod:`deepactors._core.pacing`): with 10,000 subagents whose model
            calls return at once, a 5 ms timer beside them fires ~10 ms late
            instead of seconds, and a server keeps answering. Steps past the
            slice wait in FIFO order. None turns pacing off.
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
        tracing: OpenTelemetry traces of the runs (:mod:`deepactors.tracing`):
            True traces with the global tracer provider whenever one is set
            (and costs nothing while none is); a :class:`~deepactors.tracing.Tracing`
            names a provider or content capture; False never traces.
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
                    rt = Runtime._create(
                        tg,
                        idle_timeout=idle_timeout,
                        defer_gc=defer_gc,
                        pacer=pacer,
                        system=system,
                        tracing=_tracing(tracing),
                    )
                    try:
                        yield rt
                    finally:
                        rt._close()
            finally:
                # Every actor is gone: the pump has nothing left to pace, and
                # shared resources (rt.shared) nobody can use any more close.
                system.cancel_scope.cancel()

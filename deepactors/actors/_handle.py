"""A thread's handle: the one way to start a run and to act on a conversation thread.

``rt.thread(agent, thread_id)`` gives a :class:`ThreadHandle`. Everything that
changes the thread (a run, a state update, a rollback, a delete) is an order in
the thread actor's mailbox, executed in turn with the thread's other work while
the actor holds the thread's lease, so it happens whole and in order, across
runtimes, event loops and processes, or is refused (``ThreadBusy``, for a
checkpointer that does not wait). The server, the agent facade and the CLI act
on threads only through it. A run that belongs to no thread starts through
``rt.thread(agent)``, a :class:`OneShotHandle`: each of its runs gets an actor
of its own, which leaves when the run ends.

Reading the saved state or history does not take a turn: a thread's records
are an append-only log stored in atomic batches (a rollback appends a marker,
see :mod:`._journal`), so a read sees the thread as it was at one moment, and
while a run is in progress it sees the steps already saved, as LangGraph's
server shows them. Only a delete and :meth:`ThreadHandle.keep_latest` take
records away, each one transaction under the lease. :meth:`ThreadHandle.view`
keeps what a read found (memoized on the thread's head) while the thread's
actor is alive and nothing has changed the thread since.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, Unpack, final

from .._core.public import NoPublicConstructor
from ..errors import ConfigurationError, InputError
from ..persistence import (
    Checkpointer,
    CheckpointRecord,
    CheckpointWrite,
    Rewritable,
    ThreadLease,
)
from ..state import AgentResult, State, validate_input
from ._actor import (
    Operation,
    OpOrder,
    Order,
    RunHandle,
    RunOptions,
    StartOptions,
    ThreadActor,
    ThreadView,
    await_handle,
    deadline,
)
from ._compact import compact
from ._restored import ROLLBACK, Restored
from ._spec import AgentSpec, RunInput, prepare_input
from ._threads import ThreadState, saved_state, saver

__all__ = ["OneShotHandle", "ThreadHandle", "ThreadHost"]

T = TypeVar("T")


class ThreadHost(Protocol):
    """What a handle needs of its runtime (a :class:`~deepactors.actors.Runtime`)."""

    async def _queue_run(
        self, spec: AgentSpec, thread_id: str | None, run_input: RunInput, options: RunOptions
    ) -> RunHandle: ...

    def _queue_run_nowait(
        self, spec: AgentSpec, thread_id: str | None, run_input: RunInput, options: RunOptions
    ) -> RunHandle: ...

    async def _queue_order(self, spec: AgentSpec, thread_id: str, order: Order) -> None: ...

    def _live_actor(self, spec: AgentSpec, thread_id: str) -> ThreadActor | None: ...


@final
class OneShotHandle(metaclass=NoPublicConstructor):
    """Runs of one agent that belong to no thread. Get it with ``Runtime.thread(agent)``.

    Each run gets an actor of its own that leaves when the run ends: nothing
    is kept, and runs of one handle do not wait for each other.
    """

    __slots__ = ("_host", "_spec")

    _obtain = "get one from Runtime.thread(agent)"

    def __init__(self, host: ThreadHost, spec: AgentSpec) -> None:
        self._host = host
        self._spec = spec

    def __repr__(self) -> str:
        return f"<OneShotHandle {self._spec.name!r}>"

    @property
    def thread_id(self) -> None:
        """None: these runs belong to no thread."""
        return None

    async def start(self, input: object, **options: Unpack[StartOptions]) -> RunHandle:
        """Validate the input and start a run at once; return its handle.

        Args:
            input: What :meth:`DeepAgent.ainvoke <deepactors.DeepAgent.ainvoke>`
                takes, or a :class:`~deepactors.actors.RunInput`.
            **options: See :class:`~deepactors.actors.StartOptions`.

        Raises:
            InputError: The input or an option is invalid (nothing was started).
            RuntimeClosed: The runtime is closing.
        """
        run_input, run_options = RunOptions.split(self._spec, input, None, options)
        return await self._host._queue_run(self._spec, None, run_input, run_options)

    def start_nowait(self, input: object, **options: Unpack[StartOptions]) -> RunHandle:
        """:meth:`start`, for a caller that cannot await (a run of no thread never waits)."""
        run_input, run_options = RunOptions.split(self._spec, input, None, options)
        return self._host._queue_run_nowait(self._spec, None, run_input, run_options)

    async def ainvoke(self, input: object, **options: Unpack[StartOptions]) -> AgentResult:
        """Start a run and return its final state.

        If the caller is cancelled, the run is cancelled too (and awaited, so
        nothing of it is alive when this returns).
        """
        return await await_handle(await self.start(input, **options))


@final
class ThreadHandle(metaclass=NoPublicConstructor):
    """One thread of one agent under one runtime. Get it with ``Runtime.thread``.

    Attributes:
        thread_id: The thread.
    """

    __slots__ = ("_host", "_spec", "thread_id")

    _obtain = "get one from Runtime.thread(agent, thread_id)"

    def __init__(self, host: ThreadHost, spec: AgentSpec, thread_id: str) -> None:
        self._host = host
        self._spec = spec
        self.thread_id = thread_id

    def __repr__(self) -> str:
        return f"<ThreadHandle {self._spec.name!r} thread {self.thread_id!r}>"

    # -- orders --------------------------------------------------------------------

    async def start(self, input: object, **options: Unpack[StartOptions]) -> RunHandle:
        """Validate the input and queue a run on the thread; return its handle at once.

        Waits only when the thread's mailbox is full (backpressure); runs of
        one thread take their turns in the order they were queued.

        Args:
            input: What :meth:`DeepAgent.ainvoke <deepactors.DeepAgent.ainvoke>`
                takes, or a :class:`~deepactors.actors.RunInput`.
            **options: See :class:`~deepactors.actors.StartOptions`.

        Raises:
            InputError: The input or an option is invalid (nothing was queued).
            RuntimeClosed: The runtime is closing.
        """
        run_input, run_options = RunOptions.split(self._spec, input, self.thread_id, options)
        return await self._host._queue_run(self._spec, self.thread_id, run_input, run_options)

    def start_nowait(self, input: object, **options: Unpack[StartOptions]) -> RunHandle:
        """:meth:`start`, without waiting: for a caller that cannot await.

        Raises:
            anyio.WouldBlock: The thread's mailbox is full (nothing was queued;
                :meth:`start` waits for room).
            InputError: The input or an option is invalid (nothing was queued).
            RuntimeClosed: The runtime is closing.
        """
        run_input, run_options = RunOptions.split(self._spec, input, self.thread_id, options)
        return self._host._queue_run_nowait(self._spec, self.thread_id, run_input, run_options)

    async def ainvoke(self, input: object, **options: Unpack[StartOptions]) -> AgentResult:
        """Queue a run on the thread and return its final state.

        If the caller is cancelled, the run is cancelled too (and awaited, so
        nothing of it is alive when this returns).
        """
        return await await_handle(await self.start(input, **options))

    async def update_state(
        self, values: Mapping[str, Any], *, timeout: float | None = None
    ) -> AgentResult:
        """Apply ``values`` to the thread's state as a run would (no hook, no model call).

        The update is recorded like any other and goes through the channels'
        reducers (``messages`` append, ``todos`` replace, ...), on every
        channel, those only tools write in a run included. LangGraph's
        ``update_state``.

        Returns:
            The thread's state after the update (as a run's result).

        Raises:
            InputError: ``values`` do not fit the agent's state.
        """
        if not isinstance(values, Mapping):
            raise InputError(f"values must be a dict of channel values, not {type(values)}")
        channels = self._spec.channels
        tool_only = {k: v for k, v in values.items() if k in channels and channels[k].private}
        run_input = prepare_input(
            self._spec, {k: v for k, v in values.items() if k not in tool_only}, self.thread_id
        )
        # A client may set what only tools write in a run (todos), as in LangGraph.
        written = {**run_input.values, **validate_input(channels, tool_only, private=True)}
        run_input = dataclasses.replace(run_input, values=written, update_only=True)
        handle = await self._host._queue_run(
            self._spec, self.thread_id, run_input, RunOptions(timeout=timeout)
        )
        return await await_handle(handle)

    async def rollback(self, seq: int, *, timeout: float | None = None) -> int:
        """Take the thread back to how it was after record ``seq`` (0: empty).

        Queued behind the thread's earlier orders. The records after ``seq``
        stay in the log but no longer count (a ``rollback`` marker says so);
        :meth:`history` leaves them out.

        Returns:
            The thread's head after the rollback (the marker's ``seq``), or
            the head unchanged when ``seq`` is at or past it.

        Raises:
            InputError: ``seq`` is not a non-negative int.
        """
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise InputError(f"seq must be a record number >= 0, not {seq!r}")
        return await self._rollback(lambda: seq, timeout)

    async def fork(self, seq: int, *, timeout: float | None = None) -> int:
        """Make record ``seq`` the thread's head, in turn with its other orders.

        Decided when its turn comes (after the runs queued before it): nothing
        if ``seq`` is the head then, else a rollback to it, so what comes next
        starts from ``seq`` whatever ran in between, as a LangGraph run from a
        checkpoint does. ``seq`` may be a record an earlier rollback left out.

        Returns:
            The thread's head after it (see :meth:`rollback`).

        Raises:
            InputError: ``seq`` is not a record number >= 1.
        """
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise InputError(f"seq must be a record number >= 1, not {seq!r}")
        spec = self._spec

        async def op(checkpointer: Checkpointer, lease: ThreadLease) -> dict[str, int]:
            records = await checkpointer.read(self.thread_id)
            live = Restored(self.thread_id, records, source=checkpointer.location).records
            if (live and live[-1].seq == seq) or seq >= lease.head:
                return {"head": lease.head}
            marker = CheckpointWrite(path=spec.name, step=0, kind=ROLLBACK, data={"to": seq})
            await checkpointer.put(self.thread_id, [marker])
            return {"head": lease.head + 1}

        result = await self._operate(op, forgets=True, timeout=timeout)
        return int(result["head"])

    async def undo(self, runs: Sequence[RunHandle], *, timeout: float | None = None) -> int:
        """Take the thread back to where the earliest of ``runs`` started.

        Queued now, behind those runs (cancel them first to undo them sooner):
        where they started is known once they have run. Runs that never took
        the thread's lease changed nothing and are not counted.

        Returns:
            The thread's head after it (see :meth:`rollback`).
        """
        runs = list(runs)
        for run in runs:
            if run.thread_id != self.thread_id:
                raise InputError(f"run {run.run_id} is not a run of thread {self.thread_id!r}")

        def earliest() -> int | None:
            heads = [r.head_before for r in runs if r.head_before is not None]
            return min(heads) if heads else None

        return await self._rollback(earliest, timeout)

    async def _rollback(self, target: Callable[[], int | None], timeout: float | None) -> int:
        spec = self._spec

        async def op(checkpointer: Checkpointer, lease: ThreadLease) -> dict[str, int]:
            seq = target()
            if seq is None or seq >= lease.head:
                return {"head": lease.head}
            marker = CheckpointWrite(path=spec.name, step=0, kind=ROLLBACK, data={"to": seq})
            await checkpointer.put(self.thread_id, [marker])
            return {"head": lease.head + 1}

        result = await self._operate(op, forgets=True, timeout=timeout)
        return int(result["head"])

    async def delete(self, *, timeout: float | None = None) -> None:
        """Delete every saved record of the thread, in turn with its other work."""

        async def op(checkpointer: Checkpointer, lease: ThreadLease) -> dict[str, int]:
            await checkpointer.delete_thread(self.thread_id)
            return {}

        await self._operate(op, forgets=True, timeout=timeout)

    async def copy_from(self, source_id: str, *, timeout: float | None = None) -> int:
        """Make this thread a copy of thread ``source_id``: its whole saved history.

        An order of this (the new) thread, in its turn: the source's records, as
        stored at that moment, rollback markers included, become this thread's
        records ``1..n`` in one batch, so its state, its history and its forks
        read as the source's did (their times become the copy's). The source is
        only read.

        Returns:
            The number of records copied (0: the source has none).

        Raises:
            InputError: This thread already has records, or is the source.
        """
        if source_id == self.thread_id:
            raise InputError("a thread cannot be copied onto itself")

        async def op(checkpointer: Checkpointer, lease: ThreadLease) -> dict[str, int]:
            if lease.head:
                raise InputError(f"thread {self.thread_id!r} is not empty: it cannot be a copy")
            records = await checkpointer.read(source_id)
            await checkpointer.put(
                self.thread_id,
                [
                    CheckpointWrite(path=r.path, step=r.step, kind=r.kind, data=r.data)
                    for r in records
                ],
            )
            return {"copied": len(records)}

        result = await self._operate(op, forgets=True, timeout=timeout)
        return int(result["copied"])

    async def keep_latest(self, *, timeout: float | None = None) -> int:
        """Drop the thread's history, keeping its latest state (``keep_latest``).

        An order of the thread, in its turn (a run in progress ends first):
        its journal becomes one record of its state as it stands, plus what
        resuming it needs (a pending interrupt or breakpoint, the results of
        an unfinished step and its subagents' records), swapped in one
        transaction. Its state, what it waits for and what runs next read as
        before; its history starts there, and earlier checkpoint ids are gone.
        The rewrite is replayed and compared before it is stored.

        Returns:
            The number of records dropped (0: there was nothing to drop).

        Raises:
            ConfigurationError: The agent has no checkpointer, or one that cannot
                replace a thread's records (:class:`~deepactors.persistence.Rewritable`).
            InputError: The state would not read back the same from one record
                (a channel whose reducer does not take its whole value); nothing changed.
            CheckpointCorrupt: A record cannot be read; nothing changed.
        """
        spec = self._spec
        checkpointer = saver(spec)
        if not isinstance(checkpointer, Rewritable):
            raise ConfigurationError(
                f"{type(checkpointer).__name__} cannot replace a thread's records: give it an "
                "async replace(thread_id, records) (deepactors.persistence.Rewritable) to keep "
                "only a thread's latest state"
            )
        rewriter = checkpointer

        async def op(checkpointer: Checkpointer, lease: ThreadLease) -> dict[str, int]:
            records = await checkpointer.read(self.thread_id)
            rewrite = await compact(
                self.thread_id, records, path=spec.name, state=lambda: State(spec.channels)
            )
            if rewrite is None:
                return {"dropped": 0}
            await rewriter.replace(self.thread_id, rewrite)
            return {"dropped": len(records) - len(rewrite)}

        result = await self._operate(op, forgets=True, timeout=timeout)
        return int(result["dropped"])

    async def head(self, *, timeout: float | None = None) -> int:
        """The ``seq`` of the thread's newest record (0: none), read in turn.

        Waits for the orders queued before it (a run in progress ends first),
        so the number is the thread's head between two of its orders.
        """

        async def op(checkpointer: Checkpointer, lease: ThreadLease) -> dict[str, int]:
            return {"head": lease.head}

        result = await self._operate(op, forgets=False, timeout=timeout)
        return int(result["head"])

    async def _operate(self, op: Operation, *, forgets: bool, timeout: float | None) -> AgentResult:
        saver(self._spec)  # refused here, before anything is queued
        handle = RunHandle._create(
            path=self._spec.name, thread_id=self.thread_id, deadline=deadline(timeout)
        )
        order = OpOrder(handle=handle, op=op, forgets=forgets)
        await self._host._queue_order(self._spec, self.thread_id, order)
        return await await_handle(handle)

    # -- reads ---------------------------------------------------------------------

    async def state(self, *, upto_seq: int | None = None, path: str | None = None) -> ThreadState:
        """The thread's saved state, now or as it was at record ``upto_seq``.

        Args:
            upto_seq: Rebuild from the records up to this one.
            path: Another actor of the tree (a subagent, ``main/task-2:researcher``).

        Raises:
            ConfigurationError: The agent has no checkpointer.
            CheckpointCorrupt: A record cannot be read; the error names the thread.
        """
        return await saved_state(self._spec, self.thread_id, upto_seq=upto_seq, path=path)

    async def view(self, render: Callable[[ThreadState], T], *, fresh: bool = False) -> T:
        """The thread's saved state as it stands, through ``render``, memoized on its head.

        Read as :meth:`state` reads it; what ``render`` made of it is kept by
        the thread's actor, keyed by ``render``, and given again while that
        actor is alive (it leaves after ``idle_timeout``) and no order of this
        runtime has changed the thread since: a client that polls a thread
        costs one read and one rendering per change. Nothing is kept while a
        run is in progress (each read sees the steps saved so far), nor when
        the thread has no actor.

        Args:
            render: Makes what the caller keeps of the state (a server's JSON):
                a pure function, called once per head.
            fresh: Read the thread again whatever is kept (another process
                wrote it).

        Raises:
            ConfigurationError: The agent has no checkpointer.
            CheckpointCorrupt: A record cannot be read; the error names the thread.
        """
        actor = self._host._live_actor(self._spec, self.thread_id)
        if actor is None:
            return render(await self.state())
        kept = actor.view
        if kept is not None and not fresh and not actor.running:
            return kept.rendered(render)
        generation, busy = actor.generation, actor.running
        state = await self.state()
        if busy or actor.running or actor.generation != generation:
            return render(state)  # the thread changed meanwhile: nothing to keep
        actor.view = ThreadView(state)
        return actor.view.rendered(render)

    async def history(
        self, *, path: str | None = None, upto_seq: int | None = None, superseded: bool = False
    ) -> list[CheckpointRecord]:
        """The thread's records that count, oldest first (rolled-back ones left out).

        Args:
            path: Only the records of this actor (``main``, a subagent's path).
            upto_seq: As the thread stood right after record ``upto_seq``.
            superseded: Also the records a rollback left out (the earlier
                branch of a fork, still readable with ``state(upto_seq=...)``);
                the rollback markers themselves are never listed.

        Raises:
            ConfigurationError: The agent has no checkpointer.
            CheckpointCorrupt: The records are damaged.
        """
        checkpointer = saver(self._spec)
        records = await checkpointer.read(self.thread_id, upto_seq=upto_seq)
        live = Restored(self.thread_id, records, source=checkpointer.location).records
        if superseded:
            live = [r for r in records if r.kind != ROLLBACK]
        return live if path is None else [r for r in live if r.path == path]

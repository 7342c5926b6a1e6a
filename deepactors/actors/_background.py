"""Background subagents: child actors that outlive the turn that started them.

A background task is a child actor like a ``task`` call's (:func:`run_child`,
or a :class:`ChildRunner` elsewhere), started in the task group of the
runtime that hosts its thread actor instead of in the parent's tool step. So
the parent keeps working (and its run may end, and the thread take new runs)
while the child works; the thread actor owns the task and stays alive while
it runs; closing the runtime cancels it.

The thread actor keeps the registry (:class:`BackgroundTasks`) across its
runs. What a task did reaches the thread's state only through the thread's
own actor: a run of the thread collects finished tasks before its model calls
(``AsyncSubAgentMiddleware``), and a task that finishes while the thread is
idle sends the actor an order to collect it. Nothing else writes the thread.

A background child is not checkpointed step by step: its run outlives the
lease of the run that started it, so it keeps its state in memory. Its start
and its outcome are in the thread's records (the ``async_tasks`` channel); a
thread resumed after a crash finds the tasks that were still running there,
and restarts or reports them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Literal, final

import anyio

from .._core.stamps import utc_stamp
from ..context import Inbox, RunContext, TreeContext
from ..events import (
    Event,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    wants_detail,
)
from ..messages import UserMessage
from ._child import ChildOutcome, outcome_event

__all__ = [
    "TERMINAL",
    "BackgroundTask",
    "BackgroundTasks",
    "TaskStatus",
    "collected_update",
    "task_notice",
]

TaskStatus = Literal["running", "success", "error", "cancelled", "timeout", "interrupted", "lost"]
"""deepagents' task statuses, and ``lost``: running when its thread stopped (a
crash, a closed runtime) and not restarted."""

TERMINAL: frozenset[str] = frozenset(
    {"success", "error", "cancelled", "timeout", "interrupted", "lost"}
)

Runner = Callable[[RunContext, Inbox], Awaitable[ChildOutcome]]
"""Runs a task's child under the given parent context; reads messages from the inbox."""


@final
@dataclass(slots=True, kw_only=True, eq=False)
class BackgroundTask:
    """One background subagent, as its thread actor tracks it.

    Attributes:
        task_id: What the model names it by.
        agent_name: The subagent type.
        description: Its brief (kept, so a lost task can be started again).
        path: The child's actor path.
        owner: The actor path of the agent that started it (it collects it).
        run_id: The run that started it (cancelling that run cancels it).
        status: ``running`` until it ends; then how it ended.
        outcome: The child's reply, once it ended on its own.
        collected: Whether its outcome reached its owner's state.
    """

    task_id: str
    agent_name: str
    description: str
    path: str
    owner: str
    run_id: str
    created_at: str = field(default_factory=utc_stamp)
    updated_at: str = field(default_factory=utc_stamp)
    status: TaskStatus = "running"
    outcome: ChildOutcome | None = None
    collected: bool = False
    inbox: Inbox = field(default_factory=Inbox)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ended: anyio.Event = field(default_factory=anyio.Event)

    @property
    def error(self) -> str | None:
        """Why it did not succeed, in words for the model; None while running or on success."""
        if self.status in ("running", "success"):
            return None
        if self.outcome is not None:
            return self.outcome.answer
        if self.status == "timeout":
            return "the task passed the deadline of the run that started it and was cancelled"
        if self.status == "lost":
            return "the task was running when its thread stopped, and was not restarted"
        return "the task was cancelled"

    def record(self) -> dict[str, str]:
        """Its entry in the ``async_tasks`` channel (deepagents' ``AsyncTask`` and more)."""
        return {
            "task_id": self.task_id,
            "agent_name": self.agent_name,
            "thread_id": self.task_id,
            "run_id": self.run_id,
            "status": self.status,
            "created_at": self.created_at,
            "last_checked_at": utc_stamp(),
            "last_updated_at": self.updated_at,
            "description": self.description,
            "path": self.path,
            "owner": self.owner,
        }

    def report(self) -> dict[str, str | None]:
        """What ``check_async_task`` answers: status, and the result or the error."""
        out: dict[str, str | None] = {"status": self.status, "thread_id": self.task_id}
        if self.status == "success" and self.outcome is not None:
            out["result"] = self.outcome.answer
        elif self.status != "running":
            out["error"] = self.error
        return out

    def final_record(self) -> dict[str, str | None]:
        """:meth:`record` with the result or error: kept in the thread, so a
        check after the actor forgot the task (a restart) still answers."""
        out: dict[str, str | None] = {**self.record()}
        out.update((k, v) for k, v in self.report().items() if k in ("result", "error"))
        return out


@final
class BackgroundTasks:
    """The background subagents of one thread actor, across its runs.

    Args:
        start_soon: Starts a task in the group the tasks live in (the
            runtime's, so the runtime's close cancels them).
        on_end: Called with each task that ended (in the task's own task).
    """

    def __init__(
        self,
        start_soon: Callable[[Callable[[], Coroutine[object, object, None]]], None],
        on_end: Callable[[BackgroundTask], None] | None = None,
    ) -> None:
        self._start_soon = start_soon
        self._tasks: dict[str, BackgroundTask] = {}
        self._changed = anyio.Event()
        self.on_end = on_end
        # The thread's run in progress, if any: its listeners hear what the
        # tasks do, its tracer traces the tasks it starts, and its deadline
        # bounds them.
        self.emit: Callable[[Event], None] | None = None
        self.trace: Callable[[Event], None] | None = None
        self.run_id: str | None = None
        self.deadline = math.inf

    def __iter__(self) -> Iterator[BackgroundTask]:
        return iter(list(self._tasks.values()))

    def get(self, task_id: str) -> BackgroundTask | None:
        """The task with this id, if this actor knows it."""
        return self._tasks.get(task_id)

    @property
    def running(self) -> bool:
        """Whether any task is still working."""
        return any(t.status == "running" for t in self._tasks.values())

    def begin_run(
        self,
        run_id: str,
        deadline: float,
        emit: Callable[[Event], None] | None,
        trace: Callable[[Event], None] | None = None,
    ) -> None:
        """A run of the thread started: its listeners hear the tasks from now on."""
        self.run_id, self.deadline, self.emit, self.trace = run_id, deadline, emit, trace

    def end_run(self) -> None:
        """The thread's run ended: nobody listens until the next one."""
        self.run_id, self.deadline, self.emit, self.trace = None, math.inf, None, None

    def start(self, task: BackgroundTask, parent: RunContext, runner: Runner) -> None:
        """Start ``task``: ``runner`` runs its child under a context derived from ``parent``.

        The child's context shares ``parent``'s budget and pacer but not its
        journal (the task outlives the run that holds the thread's lease) nor
        its listeners (its events go to whichever run of the thread is in
        progress). It is cancelled at the deadline of the run that started it.
        """
        self._tasks[task.task_id] = task
        task.scope.deadline = self.deadline
        detached = _detached(parent, _Relay(self, self.trace))

        async def work() -> None:
            await self._work(task, detached, runner)

        self._start_soon(work)

    async def _work(self, task: BackgroundTask, parent: RunContext, runner: Runner) -> None:
        outcome: ChildOutcome | None = None
        try:
            with task.scope:
                try:
                    outcome = await runner(parent, task.inbox)
                except Exception as exc:
                    # Supervision: a runner's bug is the task's failure, never
                    # the runtime's (the task lives in the runtime's group).
                    answer = f"{type(exc).__name__}: {exc}"
                    outcome = ChildOutcome.failed(task.path, answer)
        finally:
            if outcome is not None:
                task.outcome = outcome
                task.status = _STATUS[outcome.status]
            elif task.scope.cancel_called and anyio.current_time() >= task.scope.deadline:
                task.status = "timeout"
            elif task.status == "running":
                task.status = "cancelled"
            task.updated_at = utc_stamp()
            task.ended.set()
            self._changed.set()
            if parent.emit is not None:
                parent.emit(_ended_event(parent, task))
            if self.on_end is not None:
                self.on_end(task)

    def cancel(self, task_id: str) -> BackgroundTask | None:
        """Cancel a running task (no-op for one that ended); return it."""
        task = self._tasks.get(task_id)
        if task is not None and task.status == "running":
            task.scope.cancel()
        return task

    def cancel_run(self, run_id: str) -> None:
        """Cancel every task the run ``run_id`` started (its handle was cancelled)."""
        for task in self._tasks.values():
            if task.run_id == run_id and task.status == "running":
                task.scope.cancel()

    def cancel_all(self) -> None:
        """Cancel every running task (the actor is leaving)."""
        for task in self._tasks.values():
            if task.status == "running":
                task.scope.cancel()

    def drop_all(self) -> None:
        """Cancel every task and forget them all: none is folded into the thread."""
        self.cancel_all()
        for task in self._tasks.values():
            task.collected = True
        self._tasks.clear()

    def uncollected(self, owner: str) -> list[BackgroundTask]:
        """Tasks of ``owner`` that ended and whose outcome its state has not seen."""
        return [
            t
            for t in self._tasks.values()
            if t.owner == owner and t.status != "running" and not t.collected
        ]

    def running_of(self, owner: str) -> list[BackgroundTask]:
        """Tasks of ``owner`` still working."""
        return [t for t in self._tasks.values() if t.owner == owner and t.status == "running"]

    async def wait_change(self) -> None:
        """Wait until some task ends."""
        changed = self._changed
        await changed.wait()
        if self._changed is changed:
            self._changed = anyio.Event()


class _Relay:
    """Where a task's events go: the listeners of the thread's run in progress
    (none while the thread is idle), and the tracer of the run that started it
    (its spans nest under the call that started it, after that run ended too)."""

    __slots__ = ("tasks", "trace")

    def __init__(self, tasks: BackgroundTasks, trace: Callable[[Event], None] | None) -> None:
        self.tasks = tasks
        self.trace = trace

    @property
    def structural_only(self) -> bool:
        """Whether nobody behind it reads a run's detail (see ``events.wants_detail``)."""
        emit = self.tasks.emit
        return (emit is None or not wants_detail(emit)) and (
            self.trace is None or not wants_detail(self.trace)
        )

    def __call__(self, event: Event) -> None:
        emit = self.tasks.emit
        if emit is not None:
            emit(event)
        if self.trace is not None:
            self.trace(event)


_STATUS: dict[str, TaskStatus] = {
    "completed": "success",
    "failed": "error",
    "timed_out": "timeout",
    "interrupted": "interrupted",
}


def _detached(parent: RunContext, relay: Callable[[Event], None]) -> RunContext:
    """``parent``'s context for children that outlive its run (no journal, no stream)."""
    tree = parent.tree
    detached_tree = TreeContext(
        thread_id=tree.thread_id,
        max_steps=tree.max_steps,
        budget=tree.budget,
        pacer=tree.pacer,
        identity=tree.identity,
        # A background child may start tasks of its own; it waits for them
        # (nobody would collect them after it ends).
        background=tree.background,
    )
    return dataclasses.replace(
        parent, tree=detached_tree, emit=relay, slot=None, resumed=None, inbox=None
    )


def _ended_event(
    parent: RunContext, task: BackgroundTask
) -> SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted:
    if task.outcome is not None:  # it ended on its own, as a task call's child does
        return outcome_event(task.owner, parent.run_id, task.outcome)
    # Cancelled from here, or at its starting run's deadline.
    timed_out = task.status == "timeout"
    return SubagentCancelled(
        path=task.owner, run_id=parent.run_id, child=task.path, timed_out=timed_out
    )


def task_notice(task: BackgroundTask) -> str:
    """The message that tells the owner's model a task ended (or was restarted)."""
    if task.status == "running":
        return (
            f"[Background task {task.task_id} ({task.agent_name}) was running when this "
            "thread stopped; it has been started again.]"
        )
    return (
        f"[Background task {task.task_id} ({task.agent_name}) ended: {task.status}. "
        "Call check_async_task with its task_id to read its result.]"
    )


def collected_update(task: BackgroundTask) -> dict[str, object]:
    """The state update that folds an ended task into its owner's state.

    Its entry in ``async_tasks``, its file changes (a completed child's diff,
    merged by the ``files`` reducer like a ``task`` call's, conflicts kept),
    and a message telling the model it ended.
    """
    update: dict[str, object] = {
        "async_tasks": {task.task_id: task.final_record()},
        "messages": [UserMessage(content=task_notice(task))],
    }
    outcome = task.outcome
    if task.status == "success" and outcome is not None and outcome.diff:
        update["files"] = outcome.diff
    return update

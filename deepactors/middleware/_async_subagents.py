"""Background subagents: the model starts, checks, steers and cancels long tasks.

The tools have deepagents' ``AsyncSubAgentMiddleware`` names and answers:
``start_async_task``, ``check_async_task``, ``update_async_task``,
``cancel_async_task`` and ``list_async_tasks``. Each task is a child actor
(local, or a :class:`~deepactors.actors.ChildRunner` on another server) owned by
the thread actor, not by the tool call that started it (see
:mod:`deepactors.actors._background`): the parent keeps working, its run may
end and the thread take new runs while the task works.

What a task did reaches the parent's state when it is collected: before each of
the parent's model calls, by ``check_async_task``, or (on a thread that is
idle) by an order to the thread's actor. Its file changes merge through the
``files`` reducer as a ``task`` call's do, and a message tells the model the
task ended. A task's entry in the ``async_tasks`` channel is checkpointed with
the thread; a thread resumed after a crash restarts the tasks that were still
running (or reports them lost), and never runs one that finished again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Literal, TypeAlias

from ..actors import (
    AgentSpec,
    BackgroundTask,
    BackgroundTasks,
    ChildOutcome,
    collected_update,
    run_child,
    task_notice,
)
from ..context import Inbox, RunContext, ToolRuntime
from ..errors import ConfigurationError, ToolError
from ..events import SubagentSpawned
from ..hooks import AgentMiddleware, HookResult
from ..messages import AssistantMessage, UserMessage, new_id
from ..state import Channel, State
from ..tools import Command, Tool, tool
from ._subagents import FORK_PREAMBLE, SubAgentSpec, fork_history, specs_by_name

__all__ = ["DEFAULT_MAX_BACKGROUND_TASKS", "AsyncSubAgentMiddleware", "OnLost", "OnRunEnd"]

OnRunEnd = Literal["auto", "wait", "detach", "cancel"]
OnLost = Literal["restart", "report"]

DEFAULT_MAX_BACKGROUND_TASKS = 100
"""Background tasks one agent may have working at once unless told otherwise:
a start past it is refused with a message the model reads."""

ASYNC_TASK_PROMPT = """\
## Background tasks
`start_async_task` starts a subagent in the background and returns its task_id at
once; you keep working (and may answer the user) while it runs. When a task ends
you are told so in a message. Then, or when the user asks, read its result with
`check_async_task`. `update_async_task` sends a running task more instructions,
`cancel_async_task` stops one, `list_async_tasks` shows every task with its current
status. Statuses in earlier messages may be stale: check again before you report
one. Always give task ids in full."""

START_DESCRIPTION = """\
Start a subagent in the background; returns its task_id at once.

Available subagent types:
{types}

Several can run at the same time. You are told when each ends."""


_Entry: TypeAlias = Mapping[str, object]
"""A task's entry in the ``async_tasks`` channel (see ``BackgroundTask.record``),
as saved: read back from a checkpoint, so each field is checked where it is read."""


def _merge(current: Mapping[str, _Entry], update: Mapping[str, _Entry]) -> dict[str, _Entry]:
    merged = dict(current)
    for task_id, entry in update.items():
        merged[task_id] = {**merged.get(task_id, {}), **entry}
    return merged


def _text(entry: _Entry, key: str) -> str:
    """A text field of a saved entry (``""``: missing, or not text)."""
    value = entry.get(key)
    return value if isinstance(value, str) else ""


def _registry(run: RunContext) -> BackgroundTasks:
    tasks = run.tree.background
    if not isinstance(tasks, BackgroundTasks):
        # No registry: no thread actor, or an agent above this one that runs
        # it as a subagent does not say so (``starts_background``).
        raise ToolError("background tasks need the actor runtime (this run has no thread actor)")
    return tasks


class AsyncSubAgentMiddleware(AgentMiddleware):
    """Adds the background-task tools for the given subagents.

    Args:
        subagents: The subagents ``start_async_task`` can start (local or remote).
        on_run_end: What a run does when its model is done while tasks it owns
            still work. ``wait``: wait for the next to end, tell the model, and
            let it go on (until none works). ``detach``: end the run and leave
            them working under the thread's actor (listed in the result's
            ``async_tasks``); collected when they end. ``cancel``: cancel them.
            ``auto`` (default): ``detach`` where the thread's actor outlives the
            run (a runtime you hold, a server), else ``wait`` (a one-call
            ``ainvoke``, a subagent, a run without a thread): no task is left
            without an owner.
        on_lost: What a resumed thread does with tasks that were running when it
            stopped (a crash, a closed runtime): ``restart`` them from their
            brief (default), or ``report`` them ``lost`` to the model.
        max_running: Tasks one agent may have working at once (None: no cap).
        system_prompt: The section added to the system prompt.
    """

    starts_background = True

    def __init__(
        self,
        subagents: Sequence[SubAgentSpec],
        *,
        on_run_end: OnRunEnd = "auto",
        on_lost: OnLost = "restart",
        max_running: int | None = DEFAULT_MAX_BACKGROUND_TASKS,
        system_prompt: str | None = ASYNC_TASK_PROMPT,
    ) -> None:
        if not subagents:
            raise ConfigurationError("AsyncSubAgentMiddleware needs at least one subagent")
        if on_run_end not in ("auto", "wait", "detach", "cancel"):
            raise ConfigurationError(
                f"on_run_end must be auto, wait, detach or cancel: {on_run_end!r}"
            )
        if on_lost not in ("restart", "report"):
            raise ConfigurationError(f"on_lost must be restart or report, not {on_lost!r}")
        if max_running is not None and max_running < 1:
            raise ConfigurationError("max_running must be at least 1")
        self.specs = specs_by_name(subagents)
        self.on_run_end = on_run_end
        self.on_lost = on_lost
        self.max_running = max_running
        self.system_prompt = system_prompt
        self.channels = {"async_tasks": Channel(reducer=_merge, default=dict, private=True)}
        self.tools = self._make_tools()

    # -- hooks ------------------------------------------------------------

    async def before_agent(self, state: State, run: RunContext) -> HookResult:
        """Restart (or report) this agent's tasks that were running when its thread stopped."""
        records: Mapping[str, _Entry] = state.get("async_tasks") or {}
        tasks = run.tree.background
        if not records or not isinstance(tasks, BackgroundTasks):
            return None
        for task_id, entry in records.items():
            if entry.get("status") != "running" or entry.get("owner", run.path) != run.path:
                continue
            if tasks.get(task_id) is not None:
                continue  # alive in this actor: nothing was lost
            spec = self.specs.get(_text(entry, "agent_name"))
            task = BackgroundTask(
                task_id=task_id,
                agent_name=_text(entry, "agent_name") or "?",
                description=_text(entry, "description"),
                path=_text(entry, "path") or f"{run.path}/async-{task_id}",
                owner=run.path,
                # The top-level run's: cancelling its handle cancels the task.
                run_id=run.root.run_id,
                created_at=_text(entry, "created_at"),
            )
            if self.on_lost == "restart" and spec is not None and task.description:
                _announce(run, task)
                self._start(task, spec, state, run, tasks)
                state.apply(
                    {
                        "async_tasks": {task_id: task.record()},
                        "messages": [UserMessage(content=task_notice(task))],
                    }
                )
            else:
                task.status = "lost"
                task.collected = True
                state.apply(collected_update(task))
        return None

    async def before_model(self, state: State, run: RunContext) -> HookResult:
        """Fold this agent's ended tasks into its state before its model is asked."""
        tasks = run.tree.background
        if isinstance(tasks, BackgroundTasks):
            for task in tasks.uncollected(run.path):
                state.apply(collected_update(task))
                task.collected = True
        return None

    async def after_model(self, state: State, run: RunContext) -> HookResult:
        """When the model is done while this agent's tasks work: wait, detach or cancel."""
        tasks = run.tree.background
        if not isinstance(tasks, BackgroundTasks) or not (
            tasks.running_of(run.path) or tasks.uncollected(run.path)
        ):
            return None
        last = state.messages[-1] if state.messages else None
        if not isinstance(last, AssistantMessage) or last.tool_calls:
            return None
        policy = self.on_run_end
        if policy in ("auto", "detach"):
            # Detached only where someone outlives the run to collect them.
            policy = "detach" if self._can_detach(run) else "wait"
        if policy == "detach":
            return None
        if policy == "cancel":
            running = tasks.running_of(run.path)
            for task in running:
                tasks.cancel(task.task_id)
            for task in running:
                await task.ended.wait()
            for task in tasks.uncollected(run.path):
                state.apply(collected_update(task))
                task.collected = True
            return None
        # wait: until one of this agent's tasks ends; the model hears of it
        # (before_model collects it) and goes on.
        while not tasks.uncollected(run.path):
            await tasks.wait_change()
        return {"jump_to": "model"}

    @staticmethod
    def _can_detach(run: RunContext) -> bool:
        # Only the thread's own agent: a subagent's run ends for good, and
        # nobody would collect what its tasks did.
        return run.depth == 0 and run.tree.keeps_background

    # -- tools ------------------------------------------------------------

    def _start(
        self,
        task: BackgroundTask,
        spec: SubAgentSpec,
        state: State,
        run: RunContext,
        tasks: BackgroundTasks,
        call_id: str = "",
    ) -> None:
        files = dict(state.files)  # the snapshot its diff is taken against
        agent = spec.agent
        label = task.path.rsplit("/", 1)[-1].split(":", 1)[0]
        fork = spec.mode == "fork"
        # A fork starts from the conversation before the turn that started it
        # (a restarted one: from the conversation as it is then).
        history = fork_history(state.messages, call_id) if fork else []
        brief = FORK_PREAMBLE + task.description if fork else task.description

        def runner(parent: RunContext, inbox: Inbox) -> Awaitable[ChildOutcome]:
            if isinstance(agent, AgentSpec):
                return run_child(
                    agent,
                    description=brief,
                    path=task.path,
                    label=label,
                    parent=parent,
                    files=files,
                    timeout=spec.timeout,
                    budget=spec.budget,
                    inbox=inbox,
                    history=history,
                    system_prompt=parent.system_prompt if fork else None,
                )
            return agent.run_child(
                description=task.description,
                path=task.path,
                label=label,
                parent=parent,
                files=files,
                timeout=spec.timeout,
                budget=spec.budget,
                inbox=inbox,
            )

        tasks.start(task, run, runner)

    def _make_tools(self) -> tuple[Tool, ...]:
        return (
            self._start_tool(),
            _check_tool(),
            _update_tool(),
            _cancel_tool(),
            _list_tool(),
        )

    def _start_tool(self) -> Tool:
        """``start_async_task``: the one tool that needs this middleware's subagents."""
        specs = self.specs
        types = "\n".join(f"- {s.name}: {s.description}" for s in specs.values())
        names = ", ".join(f"`{n}`" for n in specs)
        middleware = self

        @tool(name="start_async_task", description=START_DESCRIPTION.format(types=types))
        async def start_async_task(
            description: str, subagent_type: str, runtime: ToolRuntime
        ) -> Command | str:
            """Start a background task.

            Args:
                description: The complete brief for the subagent: what to do, what
                    to return, and any context it needs (it sees nothing else).
                subagent_type: Which subagent to use.
            """
            spec = specs.get(subagent_type)
            if spec is None:
                return f"Unknown async subagent type `{subagent_type}`. Available types: {names}"
            run = runtime.run
            tasks = _registry(run)
            cap = middleware.max_running
            if cap is not None and len(tasks.running_of(run.path)) >= cap:
                raise ToolError(
                    f"{cap} background tasks are working already (the most at once); "
                    "wait for one to end, or cancel one"
                )
            task_id = new_id()
            task = BackgroundTask(
                task_id=task_id,
                agent_name=spec.name,
                description=description,
                path=f"{run.path}/async-{task_id}:{spec.name}",
                owner=run.path,
                run_id=run.root.run_id,
            )
            _announce(run, task, runtime.tool_call_id)
            middleware._start(task, spec, runtime.state, run, tasks, runtime.tool_call_id)
            return Command(
                update={"async_tasks": {task_id: task.record()}},
                result=f"Launched async subagent. task_id: {task_id}",
            )

        return start_async_task


def _check_tool() -> Tool:
    """``check_async_task``: a task's status, and its result once it ended."""

    @tool(name="check_async_task")
    async def check_async_task(task_id: str, runtime: ToolRuntime) -> Command | str:
        """Check a background task: its status and, once it ended, its result.

        Args:
            task_id: The exact task_id string returned by start_async_task.
        """
        task_id = task_id.strip()
        task = _lookup(runtime, task_id)
        if isinstance(task, str):
            return task
        if not isinstance(task, BackgroundTask):  # known from the thread's records
            report = {"status": task.get("status"), "thread_id": task_id}
            report.update((k, task[k]) for k in ("result", "error") if k in task)
            return json.dumps(report)
        result = json.dumps(task.report())
        if task.status == "running" or task.collected:
            return result
        task.collected = True
        update = collected_update(task)
        del update["messages"]  # the model reads the result right here
        return Command(update=update, result=result)

    return check_async_task


def _update_tool() -> Tool:
    """``update_async_task``: more instructions for a running task."""

    @tool(name="update_async_task")
    async def update_async_task(task_id: str, message: str, runtime: ToolRuntime) -> str:
        """Send a running background task more instructions (read before its next step).

        Args:
            task_id: The exact task_id string returned by start_async_task.
            message: Follow-up instructions or context for the subagent.
        """
        task_id = task_id.strip()
        task = _lookup(runtime, task_id)
        if isinstance(task, str):
            return task
        if not isinstance(task, BackgroundTask):
            return f"Task {task_id} is not running here any more; start a new task instead."
        if task.status != "running":
            return (
                f"Task {task_id} has already ended ({task.status}); start a new task with "
                "the follow-up instead."
            )
        task.inbox.put(message)
        return f"Updated async subagent. task_id: {task_id}"

    return update_async_task


def _cancel_tool() -> Tool:
    """``cancel_async_task``: stops a running task and records its end."""

    @tool(name="cancel_async_task")
    async def cancel_async_task(task_id: str, runtime: ToolRuntime) -> Command | str:
        """Cancel a running background task that is no longer needed.

        Args:
            task_id: The exact task_id string returned by start_async_task.
        """
        task_id = task_id.strip()
        task = _lookup(runtime, task_id)
        if isinstance(task, str):
            return task
        if not isinstance(task, BackgroundTask):
            return f"Task {task_id} is not running (status: {task.get('status')})."
        if task.status != "running":
            return f"Task {task_id} already ended (status: {task.status})."
        _registry(runtime.run).cancel(task_id)
        await task.ended.wait()
        task.collected = True
        return Command(
            update={"async_tasks": {task_id: task.final_record()}},
            result=f"Cancelled async subagent task: {task_id}",
        )

    return cancel_async_task


def _list_tool() -> Tool:
    """``list_async_tasks``: the tracked tasks with their statuses."""

    @tool(name="list_async_tasks")
    async def list_async_tasks(
        runtime: ToolRuntime,
        status_filter: Literal["running", "success", "error", "cancelled", "all"] | None = None,
    ) -> str:
        """List the background tasks with their current statuses.

        Args:
            status_filter: Only tasks with this status (default: all).
        """
        records: Mapping[str, _Entry] = runtime.state.get("async_tasks") or {}
        entries = []
        for task_id, entry in records.items():
            live = _live(runtime, task_id)
            status = live.status if live is not None else entry.get("status")
            if status_filter not in (None, "all") and status != status_filter:
                continue
            agent = entry.get("agent_name")
            entries.append(f"- task_id: {task_id}  agent: {agent}  status: {status}")
        if not entries:
            return "No async subagent tasks tracked."
        return f"{len(entries)} tracked task(s):\n" + "\n".join(entries)

    return list_async_tasks


def _announce(run: RunContext, task: BackgroundTask, call_id: str | None = None) -> None:
    """Tell the run's listeners a background task started (``call_id``: the tool call's)."""
    if run.emit is not None:
        run.emit(
            SubagentSpawned(
                path=run.path,
                run_id=run.run_id,
                child=task.path,
                subagent_type=task.agent_name,
                description=task.description,
                call_id=call_id,
                background=True,
            )
        )


def _live(runtime: ToolRuntime, task_id: str) -> BackgroundTask | None:
    tasks = runtime.run.tree.background
    if not isinstance(tasks, BackgroundTasks):
        return None
    task = tasks.get(task_id)
    return task if task is not None and task.owner == runtime.run.path else None


def _lookup(runtime: ToolRuntime, task_id: str) -> BackgroundTask | _Entry | str:
    """The task alive in this actor, else its saved entry, else what to tell the model."""
    task = _live(runtime, task_id)
    if task is not None:
        return task
    entry = _entry(runtime.state, task_id)
    if entry is not None:
        return entry
    return f"No tracked task found for task_id: {task_id!r}"


def _entry(state: State, task_id: str) -> _Entry | None:
    records: Mapping[str, object] = state.get("async_tasks") or {}
    entry = records.get(task_id)
    return entry if isinstance(entry, Mapping) else None

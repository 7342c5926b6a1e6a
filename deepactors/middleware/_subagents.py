"""Subagents: the ``task`` tool, each call a child actor with its own context.

A ``task`` call starts a child actor (see :mod:`deepactors.actors._child`) with
fresh messages (just the description), its own plan, and a copy-on-write view of
the parent's files. Only its final answer comes back as the tool result; its file
changes come back as a diff that the parent's ``files`` reducer merges. All the
``task`` calls of one model turn run concurrently.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never, final

import anyio

from ..actors import AgentSpec, ChildOutcome, ChildRunner, outcome_event, run_child
from ..budget import Budget
from ..context import RunContext, RunKey, ToolRuntime
from ..errors import ConfigurationError, ToolError
from ..events import (
    SubagentSpawned,
)
from ..hooks import AgentMiddleware
from ..interrupts import Interrupt
from ..messages import AssistantMessage, Message
from ..models import ChatModel, SupportsAclose
from ..state import State
from ..tools import Command, Tool, tool

__all__ = [
    "DEFAULT_MAX_CONCURRENT_SUBAGENTS",
    "FORK_PREAMBLE",
    "GENERAL_PURPOSE",
    "GENERAL_PURPOSE_DESCRIPTION",
    "GENERAL_PURPOSE_PROMPT",
    "SubAgentMiddleware",
    "SubAgentSpec",
    "aclose_tree_models",
    "fork_history",
    "specs_by_name",
    "tree_models",
]

GENERAL_PURPOSE = "general-purpose"

DEFAULT_MAX_CONCURRENT_SUBAGENTS = 1000
"""Subagents one run has working at once unless told otherwise. A model that asks
for more (a loop, a bad plan, a hostile prompt) gets them in turn, not all at
once: each working child holds a context and a place in the model's request
queue, while a queued one is an index in its tool step until it starts. Wide
enough that real fan-outs (tens to hundreds of children) never wait on it; pass
``None`` to lift it."""

GENERAL_PURPOSE_DESCRIPTION = (
    "A general agent with the same tools as you. Give it a self-contained piece of work "
    "(research a question, draft a section, check a set of files) to keep its steps out "
    "of your context."
)

GENERAL_PURPOSE_PROMPT = (
    "You are a subagent working on one delegated task. Do the task with your tools, then "
    "reply with a complete, self-contained final answer: it is the only thing the agent "
    "that delegated to you will see of your work. Files you write are shared with it."
)

SUBAGENT_PROMPT = """\
## Delegating with `task`
`task` hands a self-contained piece of work to a subagent that starts with a clean
context and reports back one final answer. Use it for independent work (research on
separate questions, separate files) and call it several times in one turn to run
the work in parallel. Write the description as a complete brief: the subagent sees
nothing else of the conversation. Files the subagent writes are merged back into
yours; if two agents changed the same lines, the result tells you where the other
version was saved."""

TASK_DESCRIPTION = """\
Start a subagent on a task; returns its final answer.

Available subagent types:
{types}

Several `task` calls in one turn run at the same time."""


FORK_PREAMBLE = (
    "You are a fork of the agent whose conversation is above: you share its context and "
    "instructions, but not its tools for delegating. Do only the task below, then reply "
    "with a complete final answer: it is all the agent that forked you will see of your "
    "work.\n\nYour task: "
)


def fork_history(messages: Sequence[Message], call_id: str) -> list[Message]:
    """The parent's conversation a forked child starts from: everything before the
    model turn that made call ``call_id`` (that turn's calls have no results yet)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AssistantMessage) and any(
            c.id == call_id for c in message.tool_calls
        ):
            return list(messages[:i])
    return list(messages)


class _TaskLabels:
    """A run's ``task-<n>`` labels, numbered along the thread's history.

    Read up to the call asked for, not further: the first ``task`` call of a
    turn of 100,000 does not label the other 99,999 in one step.
    """

    __slots__ = ("count", "labels", "scanned", "within")

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.scanned = 0  # the message being read
        self.within = 0  # its next tool call to read
        self.count = 0

    def label(self, messages: Sequence[Message], call_id: str) -> str | None:
        """The label of ``call_id``, reading the history on as far as it."""
        found = self.labels.get(call_id)
        i, j, count, total = self.scanned, self.within, self.count, len(messages)
        while found is None and i < total:
            message = messages[i]
            if isinstance(message, AssistantMessage):
                calls = message.tool_calls
                while j < len(calls):
                    call = calls[j]
                    j += 1
                    if call.name == "task":
                        count += 1
                        self.labels[call.id] = f"task-{count}"
                        if call.id == call_id:
                            found = self.labels[call.id]
                            break
                if j < len(calls):
                    break  # found before this turn's last call: go on from there next time
            i, j = i + 1, 0
        self.scanned, self.within, self.count = i, j, count
        return found


_LABELS = RunKey("SubAgentMiddleware.labels", _TaskLabels)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SubAgentSpec:
    """A subagent the ``task`` tool can start.

    Attributes:
        name: The ``subagent_type`` value that selects it.
        description: What the parent model is told it is good for.
        agent: The agent it runs (a ``DeepAgent``'s ``spec``), or a
            :class:`~deepactors.actors.ChildRunner` that runs it elsewhere (a
            :class:`~deepactors.remote.RemoteAgent` on another server).
        timeout: Seconds it may take once started (waiting for a slot of the
            tree's cap included), or None.
        budget: Its own budget, inside its parent's: each of its runs (and
            their subagents) may spend at most this, and every call counts
            against the budgets above too.
        background: Started only in the background (``start_async_task``,
            see :class:`AsyncSubAgentMiddleware`), never by ``task``.
        mode: ``isolated`` (default): the child starts from the brief alone.
            ``fork``: it starts from its parent's conversation and system
            prompt, the brief as the next message (deepagents' fork mode):
            for work that needs what the parent knows. A local agent only.
    """

    name: str
    description: str
    agent: AgentSpec | ChildRunner
    timeout: float | None = None
    budget: Budget | None = None
    background: bool = False
    mode: Literal["isolated", "fork"] = "isolated"

    def __post_init__(self) -> None:
        if self.mode not in ("isolated", "fork"):
            raise ConfigurationError(
                f"subagent {self.name!r}: mode must be 'isolated' or 'fork', not {self.mode!r}"
            )
        if self.mode == "fork" and not isinstance(self.agent, AgentSpec):
            raise ConfigurationError(
                f"subagent {self.name!r}: only a local agent can be forked (mode='fork')"
            )


def specs_by_name(subagents: Sequence[SubAgentSpec]) -> dict[str, SubAgentSpec]:
    """The subagents by name (what the model selects them by).

    Raises:
        ConfigurationError: Two share a name.
    """
    specs: dict[str, SubAgentSpec] = {}
    for spec in subagents:
        if spec.name in specs:
            raise ConfigurationError(f"two subagents are named {spec.name!r}")
        specs[spec.name] = spec
    return specs


class SubAgentMiddleware(AgentMiddleware):
    """Adds the ``task`` tool (in the default stack when there are subagents).

    Args:
        subagents: The subagents ``task`` can start.
        max_concurrent: Children of one run that may work at once (None: no
            cap); the rest wait their turn in the model's order, as ``task``
            calls not yet started (a child's timeout starts when it does).
        max_concurrent_total: Children of the whole actor tree that may work at
            once (checked at the top-level run).
        system_prompt: The section added to the parent's system prompt.
    """

    def __init__(
        self,
        subagents: Sequence[SubAgentSpec],
        *,
        max_concurrent: int | None = DEFAULT_MAX_CONCURRENT_SUBAGENTS,
        max_concurrent_total: int | None = None,
        system_prompt: str | None = SUBAGENT_PROMPT,
    ) -> None:
        if not subagents:
            raise ConfigurationError("SubAgentMiddleware needs at least one subagent")
        for limit in (max_concurrent, max_concurrent_total):
            if limit is not None and limit < 1:
                raise ConfigurationError("max_concurrent_subagents must be at least 1")
        self.specs = specs_by_name(subagents)
        # A child's background tasks are kept by the thread's actor, whose
        # agent is this one's (or an ancestor's): it needs to know.
        self.starts_background = any(
            isinstance(s.agent, AgentSpec) and s.agent.starts_background
            for s in self.specs.values()
        )
        self.max_concurrent = max_concurrent
        self.max_concurrent_total = max_concurrent_total
        self.system_prompt = system_prompt
        task = self._make_task_tool()
        # The run's cap is kept by its tool step (one step at a time per run),
        # which queues calls past it without starting them.
        task.max_concurrency = max_concurrent
        self.tools = (task,)

    def _make_task_tool(self) -> Tool:
        types = "\n".join(f"- {s.name}: {s.description}" for s in self.specs.values())
        specs = self.specs
        names = ", ".join(repr(n) for n in specs)

        @tool(name="task", description=TASK_DESCRIPTION.format(types=types))
        async def task(description: str, subagent_type: str, runtime: ToolRuntime) -> Command:
            """Delegate.

            Args:
                description: The complete brief for the subagent: what to do, what to
                    return, and any context it needs (it sees nothing else).
                subagent_type: Which subagent to use.
            """
            spec = specs.get(subagent_type)
            if spec is None:
                raise ToolError(
                    f"there is no subagent type {subagent_type!r}; the available types are {names}"
                )
            # The child is awaited in this frame, not one more: a parent waiting
            # on 100,000 children keeps ~0.4 KiB less per child.
            child, path = self._start(spec, description, runtime)
            return self._finish(runtime.run, path, await child)

        return task

    @staticmethod
    def _label(state: State, run: RunContext, call_id: str) -> str:
        """``task-<n>`` for the n-th ``task`` call of the thread's history.

        Numbered from the history, not from the order calls start (trio starts
        tasks in no fixed order) nor per run: a child's path and its conflict
        file names must come out the same when a stopped run resumes.
        """
        return run.local(_LABELS).label(state.messages, call_id) or f"task-{call_id}"

    def _tree_limiter(self, run: RunContext) -> anyio.Semaphore | None:
        # The tree's cap lives in the tree's context and binds every level below
        # the run, whichever agent set it.
        tree = run.tree
        if tree.subagent_limiter is None and self.max_concurrent_total is not None:
            tree.subagent_limiter = anyio.Semaphore(self.max_concurrent_total)
        return tree.subagent_limiter

    def _start(
        self, spec: SubAgentSpec, description: str, rt: ToolRuntime
    ) -> tuple[Awaitable[ChildOutcome], str]:
        """Start the child (its ``SubagentSpawned`` event sent): what to await, and its path."""
        run = rt.run
        label = self._label(rt.state, run, rt.tool_call_id)
        child_path = f"{run.path}/{label}:{spec.name}"
        emit = run.emit
        if emit is not None:
            emit(
                SubagentSpawned(
                    path=run.path,
                    run_id=run.run_id,
                    child=child_path,
                    subagent_type=spec.name,
                    description=description,
                    call_id=rt.tool_call_id,
                )
            )
        agent = spec.agent
        # Made here for every kind of child: one that runs elsewhere (a Ray
        # worker's) reads the tree's cap from the tree's context.
        tree_limiter = self._tree_limiter(run)
        if isinstance(agent, AgentSpec):
            fork = spec.mode == "fork"
            child = run_child(
                agent,
                description=FORK_PREAMBLE + description if fork else description,
                path=child_path,
                label=label,
                parent=run,
                files=rt.state.files,
                timeout=spec.timeout,
                tree_limiter=tree_limiter,
                budget=spec.budget,
                history=fork_history(rt.state.messages, rt.tool_call_id) if fork else (),
                system_prompt=run.system_prompt if fork else None,
            )
        else:
            child = agent.run_child(
                description=description,
                path=child_path,
                label=label,
                parent=run,
                files=rt.state.files,
                timeout=spec.timeout,
                budget=spec.budget,
            )
        return child, child_path

    @staticmethod
    def _finish(run: RunContext, child_path: str, outcome: ChildOutcome) -> Command:
        """The ``task`` call's result from the child's outcome (its event sent).

        Raises:
            Interrupt: The child waits for a human.
            ToolError: The child failed or timed out.
        """
        emit = run.emit
        if emit is not None:
            emit(outcome_event(run.path, run.run_id, outcome))
        match outcome.status:
            case "completed":
                update: Mapping[str, object] = {"files": outcome.diff} if outcome.diff else {}
                return Command(update=update, result=outcome.answer)
            case "interrupted":
                # A call inside the child waits for a human: stop this run too, so
                # the request reaches the top-level caller with the child's path.
                raise Interrupt(outcome.requests)
            case "failed":
                raise ToolError(f"the subagent {child_path} failed: {outcome.answer}")
            case "timed_out":
                raise ToolError(outcome.answer)
            case _:
                assert_never(outcome.status)


def tree_models(spec: AgentSpec) -> set[ChatModel]:
    """The model of ``spec`` and of every subagent under it (recursively)."""
    seen: set[ChatModel] = set()
    todo, visited = [spec], set()
    while todo:
        current = todo.pop()
        if id(current) in visited:
            continue
        visited.add(id(current))
        seen.add(current.model)
        for mw in current.middleware:
            # SubAgentMiddleware and AsyncSubAgentMiddleware: both keep their specs here.
            specs = getattr(mw, "specs", None)
            if isinstance(specs, dict):
                todo.extend(
                    s.agent
                    for s in specs.values()
                    if isinstance(s, SubAgentSpec) and isinstance(s.agent, AgentSpec)
                )
    return seen


async def aclose_tree_models(spec: AgentSpec) -> None:
    """Close the models of ``spec``'s tree that hold resources, shielded from cancellation.

    The sync API runs each call on a fresh event loop; a model's HTTP client
    belongs to the loop that made it, so it is closed before that loop ends.
    """
    for model in tree_models(spec):
        if isinstance(model, SupportsAclose):
            with anyio.CancelScope(shield=True):
                await model.aclose()

"""Subagents: the ``task`` tool, each call a child actor with its own context.

A ``task`` call starts a child actor (see :mod:`deepactors.actors._child`) with
fresh messages (just the description), its own plan, and a copy-on-write view of
the parent's files. Only its final answer comes back as the tool result; its file
changes come back as a diff that the parent's ``files`` reducer merges. All the
``task`` calls of one model turn run concurrently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..context import RunContext, ToolRuntime
from ..errors import ConfigurationError, ToolError
from ..events import SubagentCancelled, SubagentFailed, SubagentFinished, SubagentSpawned
from ..interrupts import Interrupt
from ..messages import AssistantMessage
from ..state import State
from ..tools import Command, Tool, tool
from ._base import AgentMiddleware

if TYPE_CHECKING:
    from ..agent import DeepAgent

__all__ = ["GENERAL_PURPOSE", "SubAgentMiddleware", "SubAgentSpec"]

GENERAL_PURPOSE = "general-purpose"

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


def _run_child() -> Any:
    """The child-actor runner, imported on first use.

    The actor runtime imports this package, so the import cannot sit at the top;
    and a function-level ``from ... import`` costs ~10 us per call (the import
    system runs each time), which is too much per subagent.
    """
    global _RUN_CHILD
    if _RUN_CHILD is None:
        from ..actors._child import run_child

        _RUN_CHILD = run_child
    return _RUN_CHILD


_RUN_CHILD: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubAgentSpec:
    """A subagent the ``task`` tool can start.

    Attributes:
        name: The ``subagent_type`` value that selects it.
        description: What the parent model is told it is good for.
        agent: The agent it runs (any deepactors agent).
        timeout: Seconds it may take (waiting for a slot included), or None.
    """

    name: str
    description: str
    agent: DeepAgent
    timeout: float | None = None


class SubAgentMiddleware(AgentMiddleware):
    """Adds the ``task`` tool (in the default stack when there are subagents).

    Args:
        subagents: The subagents ``task`` can start.
        max_concurrent: Children of one run that may work at once; the rest wait
            their turn (the wait counts against their timeout).
        max_concurrent_total: Children of the whole actor tree that may work at
            once (checked at the top-level run).
        system_prompt: The section added to the parent's system prompt.
    """

    def __init__(
        self,
        subagents: Sequence[SubAgentSpec],
        *,
        max_concurrent: int | None = None,
        max_concurrent_total: int | None = None,
        system_prompt: str | None = SUBAGENT_PROMPT,
    ) -> None:
        if not subagents:
            raise ConfigurationError("SubAgentMiddleware needs at least one subagent")
        for limit in (max_concurrent, max_concurrent_total):
            if limit is not None and limit < 1:
                raise ConfigurationError("max_concurrent_subagents must be at least 1")
        self.specs: dict[str, SubAgentSpec] = {}
        for spec in subagents:
            if spec.name in self.specs:
                raise ConfigurationError(f"two subagents are named {spec.name!r}")
            self.specs[spec.name] = spec
        self.max_concurrent = max_concurrent
        self.max_concurrent_total = max_concurrent_total
        self.system_prompt = system_prompt
        self.tools = (self._make_task_tool(),)

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
            return await self._delegate(spec, description, runtime)

        return task

    @staticmethod
    def _label(state: State, run: RunContext, call_id: str) -> str:
        """``task-<n>`` for the n-th ``task`` call of the thread's history.

        Numbered from the history, not from the order calls start (trio starts
        tasks in no fixed order) nor per run: a child's path and its conflict
        file names must come out the same when a stopped run resumes.
        """
        labels: dict[str, str] = run.services.setdefault("task_labels", {})
        if call_id not in labels:
            messages = state.messages
            scanned = run.services.get("task_labels_scanned", 0)
            count = run.services.get("task_labels_count", 0)
            for message in messages[scanned:]:
                if isinstance(message, AssistantMessage):
                    for call in message.tool_calls:
                        if call.name == "task":
                            count += 1
                            labels[call.id] = f"task-{count}"
            run.services["task_labels_scanned"] = len(messages)
            run.services["task_labels_count"] = count
        return labels.get(call_id) or f"task-{call_id}"

    def _limiters(self, run: RunContext) -> tuple[anyio.Semaphore | None, anyio.Semaphore | None]:
        own = None
        if self.max_concurrent is not None:
            own = run.services.get("subagent_limiter")
            if own is None:
                own = run.services["subagent_limiter"] = anyio.Semaphore(self.max_concurrent)
        # The tree's cap lives at the root run and binds every level below it,
        # whichever agent set it.
        root = run.root.services
        tree = root.get("subagent_tree_limiter")
        if tree is None and self.max_concurrent_total is not None:
            tree = root["subagent_tree_limiter"] = anyio.Semaphore(self.max_concurrent_total)
        return own, tree

    async def _delegate(self, spec: SubAgentSpec, description: str, rt: ToolRuntime) -> Command:
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
                )
            )
        own, tree = self._limiters(run)
        outcome = await _run_child()(
            spec.agent,
            description=description,
            path=child_path,
            label=label,
            parent=run,
            files=rt.state.files,
            timeout=spec.timeout,
            limiter=own,
            tree_limiter=tree,
        )
        if emit is not None:
            if outcome.status == "completed":
                emit(
                    SubagentFinished(
                        path=run.path, run_id=run.run_id, child=child_path, usage=outcome.usage
                    )
                )
            elif outcome.status == "failed":
                emit(
                    SubagentFailed(
                        path=run.path, run_id=run.run_id, child=child_path, error=outcome.answer
                    )
                )
            else:
                emit(
                    SubagentCancelled(
                        path=run.path,
                        run_id=run.run_id,
                        child=child_path,
                        timed_out=outcome.status == "timed_out",
                    )
                )
        if outcome.status == "interrupted":
            # A call inside the child waits for a human: stop this run too, so the
            # request reaches the top-level caller with the child's path.
            raise Interrupt(outcome.requests)
        if outcome.status == "failed":
            raise ToolError(f"the subagent {child_path} failed: {outcome.answer}")
        if outcome.status != "completed":
            raise ToolError(outcome.answer)
        update: Mapping[str, object] = {"files": outcome.diff} if outcome.diff else {}
        return Command(update=update, result=outcome.answer)

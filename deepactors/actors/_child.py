"""Child actors: a subagent run in the task of the parent's tool call that asked for it.

:func:`run_child` runs the child actor in the task of the calling tool call,
which lives in the task group of the parent's tool step. So a child can never
outlive the call that made it, and cancelling the parent's scope cancels the
child's whole subtree with it. The child's own tool steps open their own task
groups under it.

The child's reply is a message (:class:`ChildOutcome`): its final answer and
its file diff, or a failure or cancellation notice. Exceptions never escape into
the shared task group, so a failing child cannot cancel its siblings.

A child gets its one order (the task description) when it is made, and nothing
can reach it while it runs, so it has no mailbox: at 10,000 children at once,
each stream pair is a dozen objects the garbage collector walks at every full
collection. When messages to running children come (resume decisions,
background subagents), a mailbox comes with the sender that needs it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, assert_never, final, runtime_checkable

import anyio

from ..budget import Budget
from ..context import Inbox, RunContext, TreeSlot
from ..events import SubagentCancelled, SubagentFailed, SubagentFinished, SubagentInterrupted
from ..filediff import FileDiff, FileRecord, diff_files
from ..interrupts import ActionRequest, Interrupt
from ..messages import AssistantMessage, Message, Usage, UserMessage
from ..state import State
from ._loop import run_loop
from ._session import child_session
from ._spec import AgentSpec
from ._tool_call import stop_in

__all__ = ["ChildOutcome", "ChildRunner", "ChildStatus", "outcome_event", "run_child"]

ChildStatus = Literal["completed", "failed", "timed_out", "interrupted"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOutcome:
    """A child's reply to its parent.

    Attributes:
        status: ``completed``, ``failed``, ``timed_out`` or ``interrupted``
            (waiting for human decisions: ``requests``). A child cancelled from
            above has no outcome: its cancellation is its parent's.
        usage: Tokens the child and its own subagents spent (completed children).
        answer: The child's final answer (completed), or why it did not finish.
        diff: Its file changes; None unless it completed (all or nothing).
        path: The child's actor path.
    """

    status: ChildStatus
    answer: str
    diff: FileDiff | None
    path: str
    requests: tuple[ActionRequest, ...] = ()
    usage: Usage | None = None

    @classmethod
    def failed(cls, path: str, why: str) -> ChildOutcome:
        """A child that did not finish, and why (what the parent's model reads)."""
        return cls(status="failed", answer=why, diff=None, path=path)

    @classmethod
    def timed_out(cls, path: str, timeout: float, what: str, ended: str) -> ChildOutcome:
        """A child stopped at its own ``timeout`` (seconds), its file changes dropped.

        Args:
            path: The child's actor path.
            timeout: Its timeout.
            what: What did not finish (``"The subagent"``).
            ended: What became of it (``"it was cancelled"``).
        """
        return cls(
            status="timed_out",
            answer=f"{what} did not finish within its {timeout:g} s timeout; {ended}.",
            diff=None,
            path=path,
        )


@runtime_checkable
class ChildRunner(Protocol):
    """A subagent that runs somewhere other than in this actor tree (another server).

    ``task`` and the background-task tools call :meth:`run_child` where a
    local subagent's :class:`AgentSpec` would be run by :func:`run_child`, with
    the same arguments and the same kind of reply, so a remote child's answer
    and file changes merge into its parent exactly as a local child's do.
    """

    @property
    def name(self) -> str:
        """The subagent's name (read-only: a frozen dataclass's field fits)."""
        ...

    def run_child(
        self,
        *,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        timeout: float | None,
        budget: Budget | None = None,
        inbox: Inbox | None = None,
    ) -> Awaitable[ChildOutcome]:
        """Run the child to its end and reply; see :func:`run_child` for the arguments.

        Cancelling the awaiting task must stop the child wherever it runs.
        Messages put in ``inbox`` while it runs must reach it.
        """
        ...


def outcome_event(
    path: str, run_id: str, outcome: ChildOutcome
) -> SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted:
    """The event that tells a child's outcome, emitted by its parent at ``path``."""
    child = outcome.path
    match outcome.status:
        case "completed":
            return SubagentFinished(path=path, run_id=run_id, child=child, usage=outcome.usage)
        case "failed":
            return SubagentFailed(path=path, run_id=run_id, child=child, error=outcome.answer)
        case "timed_out":
            return SubagentCancelled(path=path, run_id=run_id, child=child, timed_out=True)
        case "interrupted":
            return SubagentInterrupted(
                path=path,
                run_id=run_id,
                child=child,
                requests=[r.to_dict() for r in outcome.requests],
            )
        case _:
            assert_never(outcome.status)


def _final_answer(state: State) -> str:
    structured = state.get("structured_response")
    if structured is not None:
        # As JSON, through the channel's own encoder (a model, a dataclass, a dict).
        return json.dumps(state.channels["structured_response"].encode(structured))
    for message in reversed(state.messages):
        if isinstance(message, AssistantMessage) and message.text.strip():
            return message.text
    return "(the subagent finished without a final message)"


def run_child(
    spec: AgentSpec,
    *,
    description: str,
    path: str,
    label: str,
    parent: RunContext,
    files: Mapping[str, FileRecord],
    timeout: float | None,
    tree_limiter: anyio.Semaphore | None = None,
    budget: Budget | None = None,
    inbox: Inbox | None = None,
    history: Sequence[Message] = (),
    system_prompt: str | None = None,
) -> Awaitable[ChildOutcome]:
    """Run the agent ``spec`` as a child actor of ``parent``; await its reply.

    ``tree_limiter`` caps the whole tree's children working at once (the
    parent's own cap is its tool step's). ``budget`` is the child's own, inside
    its parent's. ``inbox`` carries messages sent to the child while it works
    (read before its next model call; one that arrives as it finishes starts
    another turn). A forked child starts from ``history`` (its parent's
    conversation) under ``system_prompt`` (its parent's) instead of a clean
    context. ``timeout`` covers the wait for a slot of the tree's cap too.
    Past it, the child and everything under it are cancelled and the outcome is
    ``timed_out``; its file changes are dropped whole.

    Returns the child itself to await, not a coroutine around it: one frame
    less per child, for as long as it runs.
    """
    if system_prompt is not None and system_prompt != spec.system_prompt:
        spec = _prompted(spec, system_prompt)
    child = _child(
        spec, description, path, label, parent, files, tree_limiter, budget, inbox, history
    )
    if timeout is None:
        # No scope at all without a timeout: on trio each one costs, times N children.
        return child
    return _within(child, timeout, path)


_PROMPTED: dict[tuple[int, str], tuple[AgentSpec, AgentSpec]] = {}


def _prompted(spec: AgentSpec, system_prompt: str) -> AgentSpec:
    """``spec`` under another system prompt, made once per pair (a fork's parent prompt).

    Both are kept: the key's ``id`` stays the spec's while the entry lives.
    """
    key = (id(spec), system_prompt)
    found = _PROMPTED.get(key)
    if found is None:
        found = _PROMPTED[key] = (spec, dataclasses.replace(spec, system_prompt=system_prompt))
    return found[1]


async def _within(child: Awaitable[ChildOutcome], timeout: float, path: str) -> ChildOutcome:
    with anyio.move_on_after(timeout) as scope:
        return await child
    assert scope.cancelled_caught
    return ChildOutcome.timed_out(
        path, timeout, "The subagent", "it was cancelled and none of its file changes were kept"
    )


async def _child(
    spec: AgentSpec,
    description: str,
    path: str,
    label: str,
    parent: RunContext,
    files: Mapping[str, FileRecord],
    tree_limiter: anyio.Semaphore | None,
    budget: Budget | None,
    inbox: Inbox | None = None,
    history: Sequence[Message] = (),
) -> ChildOutcome:
    """The child actor: wait for its slots, run its one order, reply."""
    lender = parent.slot
    slot = TreeSlot(tree_limiter) if tree_limiter is not None else None
    if lender is not None:
        lender.lend()
    try:
        if slot is not None:
            await slot.acquire()
        base = dict(files)  # the snapshot the diff is taken against
        # No pause for the pacer here: the tool call that runs this child just
        # had one (a fan-out's setups already wait for their slices there).
        session = child_session(
            spec, parent=parent, path=path, files=base, slot=slot, budget=budget
        )
        state, run = session.state, session.run
        run.inbox = inbox
        if not session.resumed:
            for message in history:
                state.add_message(message)
            state.add_message(UserMessage(content=description))
        try:
            await run_loop(spec, state, run)
            while inbox is not None and inbox.pending:
                # A message that came as the child gave its answer: it has
                # more to do, so it takes another turn.
                await run_loop(spec, state, run)
        except Interrupt as exc:
            return ChildOutcome(
                status="interrupted",
                answer=str(exc),
                diff=None,
                path=path,
                requests=tuple(exc.requests),
            )
        except Exception as exc:
            if stop_in(exc) is not None:
                raise  # a KeyboardInterrupt or SystemExit: for the caller, not the parent
            return ChildOutcome.failed(path, f"{type(exc).__name__}: {exc}")
        finally:
            session.close()
            parent.add_usage(run.usage)
        diff = FileDiff(changes=diff_files(base, state.files), label=label)
        return ChildOutcome(
            status="completed",
            answer=_final_answer(state),
            diff=diff,
            path=path,
            usage=run.usage,
        )
    finally:
        if slot is not None:
            slot.release()
        if lender is not None:
            await lender.reclaim()

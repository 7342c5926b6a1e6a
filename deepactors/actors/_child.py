"""Child actors: a subagent run in a task group owned by its parent's tool call.

:func:`run_child` runs the child actor in the task of the calling tool call,
which lives in the task group of the parent's tool step, with its run order
already in its mailbox; the child answers with a reply message. So a child can
never outlive the call that made it, and cancelling the parent's scope cancels
the child's whole subtree with it. The child's own tool steps open their own
task groups under it.

The child's reply is a message: its final answer and its file diff, or a failure
or cancellation notice. Exceptions never escape into the shared task group, so a
failing child cannot cancel its siblings.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..budget import Budget
from ..context import RunContext, TreeSlot
from ..filediff import FileDiff, FileRecord, diff_files
from ..interrupts import ActionRequest, Interrupt
from ..messages import AssistantMessage, Usage, UserMessage
from ..state import State
from ._loop import run_loop
from ._session import child_session
from ._spec import AgentSpec
from ._tool_call import stop_in

__all__ = ["ChildOutcome", "ChildStatus", "run_child"]

ChildStatus = Literal["completed", "failed", "timed_out", "interrupted"]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class _RunOrder:
    description: str
    reply: MemoryObjectSendStream[ChildOutcome]


class _ChildActor:
    """Owns one subagent's state for the length of one ``task`` call."""

    __slots__ = ("base_files", "budget", "label", "parent", "path", "slot", "spec")

    def __init__(
        self,
        *,
        spec: AgentSpec,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        slot: TreeSlot | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.slot = slot
        self.budget = budget
        self.spec = spec
        self.path = path
        self.label = label
        self.parent = parent
        self.base_files = dict(files)  # the snapshot the diff is taken against

    async def serve(self, mailbox: MemoryObjectReceiveStream[_RunOrder]) -> None:
        # A mailbox, not a plain call: later messages (resume decisions, updates
        # to a background subagent) reach a running child the same way.
        async with mailbox:
            async for order in mailbox:
                order.reply.send_nowait(await self._run(order.description))

    async def _run(self, description: str) -> ChildOutcome:
        parent = self.parent
        session = child_session(
            self.spec,
            parent=parent,
            path=self.path,
            files=self.base_files,
            slot=self.slot,
            budget=self.budget,
        )
        state, run = session.state, session.run
        if not session.resumed:
            state.add_message(UserMessage(content=description))
        try:
            await run_loop(self.spec, state, run)
        except Interrupt as exc:
            return ChildOutcome(
                status="interrupted",
                answer=str(exc),
                diff=None,
                path=self.path,
                requests=tuple(exc.requests),
            )
        except Exception as exc:
            if stop_in(exc) is not None:
                raise  # a KeyboardInterrupt or SystemExit: for the caller, not the parent
            return ChildOutcome(
                status="failed", answer=f"{type(exc).__name__}: {exc}", diff=None, path=self.path
            )
        finally:
            session.close()
            parent.add_usage(run.usage)
        diff = FileDiff(changes=diff_files(self.base_files, state.files), label=self.label)
        return ChildOutcome(
            status="completed",
            answer=_final_answer(state),
            diff=diff,
            path=self.path,
            usage=run.usage,
        )


def _final_answer(state: State) -> str:
    structured = state.get("structured_response")
    if structured is not None:
        # As JSON, through the channel's own encoder (a model, a dataclass, a dict).
        return json.dumps(state.channels["structured_response"].encode(structured))
    for message in reversed(state.messages):
        if isinstance(message, AssistantMessage) and message.text.strip():
            return message.text
    return "(the subagent finished without a final message)"


_NO_SCOPE = contextlib.nullcontext(None)


async def run_child(
    spec: AgentSpec,
    *,
    description: str,
    path: str,
    label: str,
    parent: RunContext,
    files: Mapping[str, FileRecord],
    timeout: float | None,
    limiter: anyio.Semaphore | None = None,
    tree_limiter: anyio.Semaphore | None = None,
    budget: Budget | None = None,
) -> ChildOutcome:
    """Run the agent ``spec`` as a child actor of ``parent`` and return its reply.

    ``limiter`` caps the parent's children working at once, ``tree_limiter`` the
    whole tree's. ``budget`` is the child's own, inside its parent's. ``timeout``
    covers the wait for a slot too. Past it, the child and everything under it
    are cancelled and the outcome is ``timed_out``; its file changes are dropped
    whole.
    """
    outcome: ChildOutcome | None = None
    lender = parent.slot
    slot = TreeSlot(tree_limiter) if tree_limiter is not None else None
    # No scope at all without a timeout: on trio each one costs, times N children.
    with anyio.move_on_after(timeout) if timeout is not None else _NO_SCOPE as scope:
        if lender is not None:
            lender.lend()
        own = False
        try:
            if limiter is not None:
                await limiter.acquire()
                own = True
            if slot is not None:
                await slot.acquire()
            actor = _ChildActor(
                spec=spec,
                path=path,
                label=label,
                parent=parent,
                files=files,
                slot=slot,
                budget=budget,
            )
            reply_send, reply_receive = anyio.create_memory_object_stream[ChildOutcome](1)
            mailbox_send, mailbox = anyio.create_memory_object_stream[_RunOrder](4)
            with reply_send, reply_receive:
                # The order is queued before the actor starts, so the actor is ready
                # the moment it runs, and neither side parks on an empty stream: the
                # reply is read once the actor's task group has closed.
                with mailbox_send:
                    mailbox_send.send_nowait(_RunOrder(description=description, reply=reply_send))
                # Yield once between spawning and running, so a wide fan-out's
                # setup and first model calls do not land in one long loop turn
                # (other tasks, timers above all, get to run in between).
                await anyio.lowlevel.checkpoint()
                # The actor runs in this task, which belongs to the parent's tool
                # step (its task group, when the step has several calls): it
                # cannot outlive the call, and needs no task of its own.
                await actor.serve(mailbox)
                outcome = reply_receive.receive_nowait()
        finally:
            if slot is not None:
                slot.release()
            if own:
                assert limiter is not None
                limiter.release()
            if lender is not None:
                await lender.reclaim()
    if outcome is None:
        assert scope is not None
        assert scope.cancelled_caught
        return ChildOutcome(
            status="timed_out",
            answer=f"The subagent did not finish within its {timeout:g} s timeout; it was "
            "cancelled and none of its file changes were kept.",
            diff=None,
            path=path,
        )
    return outcome

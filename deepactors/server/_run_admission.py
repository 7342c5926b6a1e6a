"""Admitting a new run to a thread: the assistant a resume runs as, and room made
for it as its multitask strategy says. A part of the run manager.

Both look at what the thread's checkpoint says (read through its handle, by the
manager's ``saved``): whether it waits for decisions, and whose. The manager
places the admitted run among the thread's runs with no await after
:meth:`RunAdmission.admit` returns, so two requests cannot both see a thread
idle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.exceptions import HTTPException

from ._records import AssistantRecord, RunRecord, ThreadRecord, ThreadValues
from ._run_inputs import check_goto
from ._schemas import RunCreate

__all__ = ["RunAdmission"]


class RunAdmission:
    """Decides whether, and as which assistant, a new run joins its thread.

    Args:
        assistants: The served assistants by graph id.
        saved: The thread's saved values and interrupts (the manager's ``saved``).
        make_room: Cancels (or rolls back) the runs in progress on a thread as a
            multitask strategy says, and waits for them.
    """

    __slots__ = ("_assistants", "_make_room", "_saved")

    def __init__(
        self,
        assistants: Mapping[str, AssistantRecord],
        *,
        saved: Callable[[ThreadRecord], Awaitable[ThreadValues]],
        make_room: Callable[[ThreadRecord, list[RunRecord], str], Awaitable[None]],
    ) -> None:
        self._assistants = assistants
        self._saved = saved
        self._make_room = make_room

    async def admit(self, thread: ThreadRecord, body: RunCreate) -> None:
        """Make room for a new run on ``thread`` as its multitask strategy says.

        Returns with no await between its last look at the thread's runs and
        the caller's placing the new run among them, so two requests cannot
        both see the thread idle; a strategy that waits (interrupt, rollback),
        or reading the thread, looks again after.

        Raises:
            HTTPException: 409 a busy thread with ``reject``; 422 a resume of a
                thread that waits for no decision.
        """
        while True:
            inflight = thread.inflight
            if inflight and body.multitask_strategy != "enqueue":
                await self._make_room(thread, inflight, body.multitask_strategy)
                continue
            if body.command is None or inflight or (body.command.moves and not body.command.node):
                # (An update goes on from wherever the thread stands.)
                return
            saved = await self._saved(thread)
            if thread.inflight:
                continue  # a run came while the thread was read
            node = body.command.node
            if node is not None:
                check_goto(thread, node, saved)
                return
            if not saved.interrupts and not saved.stopped:
                # (A thread stopped at a breakpoint goes on past it: LangGraph's
                # Command(resume=...) there.)
                raise HTTPException(
                    422,
                    f"command.resume: thread {thread.name!r} is not waiting for any decision",
                )
            return

    async def deciding_assistant(
        self, thread: ThreadRecord, named: AssistantRecord
    ) -> AssistantRecord:
        """The assistant a resume runs as: the one whose run stopped for the decisions.

        Decisions answer that assistant's questions, under its rules and with its
        tools; another would carry the pending calls out with its own (it may ask
        about none of them). Clients name another by themselves: deep-agents-ui
        lists every assistant's threads and resumes with the one it shows.

        Raises:
            HTTPException: 409 the assistant that stopped is not served here.
        """
        # Whether it waits for a decision is in its checkpoint (read through its handle).
        saved = await self._saved(thread)
        stopped = thread.graph_id
        if not saved.interrupts or stopped is None or stopped == named.graph_id:
            return named
        found = self._assistants.get(stopped)
        if found is None:
            raise HTTPException(
                409,
                f"thread {thread.name!r} waits for decisions of assistant {stopped!r}, "
                "which this server does not serve",
            )
        return found

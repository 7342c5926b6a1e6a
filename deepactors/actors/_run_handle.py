"""Run handles and run options: what a caller holds of a run it started.

:class:`RunHandle` is the caller's side of a run order (await its result, read
its events, cancel it); :class:`StartOptions` / :class:`RunOptions` are how a
run is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict, final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from .._core.public import NoPublicConstructor
from ..budget import Budget, BudgetReport
from ..events import Event
from ..limits import Limits, seconds
from ..messages import Usage, new_id
from ..state import AgentResult
from ._spec import AgentSpec, RunInput, prepare_input

__all__ = ["RunHandle", "RunOptions", "StartOptions", "await_handle", "deadline"]


@final
class RunHandle(metaclass=NoPublicConstructor):
    """A run in progress: await its result, read its events, or cancel it.

    Get one from a thread's handle (``await rt.thread(agent, thread_id).start(...)``).

    Attributes:
        path: The actor path of the run's root agent.
        run_id: Unique id of the run.
        thread_id: The thread it runs on, if any.
        events: The run's event stream, when it was started with ``stream=True``.
        head_before: The ``seq`` of the thread's newest saved record when the run
            took the thread's lease (0: none), so undoing the run means going
            back to it; None until then, and for a thread that is not saved.
        usage: The tokens the run's tree spent, set when it ends in any way
            (failed, cancelled or timed out too, where there is no result to
            read it from); None until then, or when its models report none.
        budget_report: What the run's tree spent of its budget, set as ``usage``
            is; None for a run without a budget.
    """

    _obtain = "start a run with rt.thread(agent, thread_id).start(input)"

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
        self.head_before: int | None = None
        self.usage: Usage | None = None
        self.budget_report: BudgetReport | None = None
        self._scope: anyio.CancelScope | None = None
        # Cancels what the run left working after it (its background subagents).
        self._on_cancel: Callable[[], None] | None = None
        self._cancelled = False
        self._forgotten = False
        self._done = anyio.Event()
        self._result: AgentResult | None = None
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
        if self._on_cancel is not None:
            self._on_cancel()

    async def wait(self) -> None:
        """Wait until the run has ended, without raising its error."""
        await self._done.wait()

    async def result(self) -> AgentResult:
        """Wait for the run and return its final state.

        Raises:
            RunCancelled: The run was cancelled through its handle.
            TimeoutError: The run passed its deadline.
            Exception: Whatever the run raised.
        """
        await self._done.wait()
        return self.result_nowait()

    def result_nowait(self) -> AgentResult:
        """The final state of a run that has ended, without waiting.

        Raises:
            anyio.WouldBlock: The run has not ended yet.
            RunCancelled: The run was cancelled through its handle.
            TimeoutError: The run passed its deadline.
            Exception: Whatever the run raised.
        """
        if not self._done.is_set():
            raise anyio.WouldBlock
        if self._forgotten:
            raise RuntimeError(f"the outcome of run {self.run_id} was let go of (forget_outcome)")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def forget_outcome(self) -> None:
        """Let go of an ended run's result or error, its events and its scope.

        For a caller that keeps the handle after reading the outcome (a server
        that records it as JSON, and keeps the handle to undo the run with
        :meth:`ThreadHandle.undo <deepactors.actors.ThreadHandle.undo>`): the
        ids, ``head_before``, ``usage`` and ``budget_report`` stay.

        Raises:
            RuntimeError: The run has not ended.
        """
        if not self._done.is_set():
            raise RuntimeError(f"run {self.run_id} has not ended: its outcome is still to come")
        self._forgotten = True
        self._result = self._error = None
        self.events = None
        self._scope = None
        self._on_cancel = None

    def _finish(self, result: AgentResult | None, error: BaseException | None) -> None:
        if not self._done.is_set():
            self._result, self._error = result, error
            self._done.set()


class StartOptions(TypedDict, total=False):
    """How to start a run (the keywords of :meth:`Runtime.start` and ``ThreadHandle.start``).

    Attributes:
        timeout: Seconds for the run, the wait in the thread's queue included.
        context: What hooks and tools read as ``run.context``, checked against
            the agent's ``context_schema``.
        budget: Limits for the run and every subagent under it
            (``result["budget"]`` reports what was spent).
        stream: Keep the run's events for :attr:`RunHandle.events`.
        on_event: Called with each of the run's events as it happens, in the
            task that emits it (the last is :class:`~deepactors.events.RunFinished`):
            for a listener that dispatches events itself (a server's
            subscribers), with no stream and no task of its own in between. It
            must not block or raise.
        on_done: Called once with the handle when the run has ended (its result
            or error set), in the actor's task: for a caller that records how
            runs end without a task awaiting each. It must not block; an error
            it raises is logged.
        interrupt_before: Nodes (``"model"``, ``"tools"``, ``"*"``) the run
            stops before (None: the agent's own; see
            :class:`~deepactors.limits.Breakpoints`).
        interrupt_after: Nodes the run stops after, likewise.
    """

    timeout: float | None
    context: object
    budget: Budget | None
    stream: bool
    on_event: Callable[[Event], None] | None
    on_done: Callable[[RunHandle], None] | None
    interrupt_before: str | Sequence[str] | None
    interrupt_after: str | Sequence[str] | None


_OPTION_NAMES = frozenset(StartOptions.__annotations__)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What the runtime needs to queue a validated run: :class:`StartOptions`
    less what went into its :class:`RunInput` (the context and the budget)."""

    timeout: float | None = None
    stream: bool = False
    on_event: Callable[[Event], None] | None = None
    on_done: Callable[[RunHandle], None] | None = None

    @classmethod
    def split(
        cls, spec: AgentSpec, input: object, thread_id: str | None, options: StartOptions
    ) -> tuple[RunInput, RunOptions]:
        """Validate ``input`` with the options that belong to it; keep the rest.

        Raises:
            InputError: The input or an option is invalid.
            TypeError: An unknown option.
        """
        if not options.keys() <= _OPTION_NAMES:
            extra = ", ".join(sorted(options.keys() - _OPTION_NAMES))
            raise TypeError(f"unknown run option(s): {extra}")
        budget = options.get("budget")
        before, after = options.get("interrupt_before"), options.get("interrupt_after")
        run_input = prepare_input(
            spec,
            input,
            thread_id,
            context=options.get("context"),
            limits=None if budget is None else Limits(budget=budget),
            breakpoints=None
            if before is None and after is None
            else spec.breakpoints.over(before, after),
        )
        return run_input, cls(
            timeout=seconds(options.get("timeout")),
            stream=options.get("stream", False),
            on_event=options.get("on_event"),
            on_done=options.get("on_done"),
        )


def deadline(timeout: float | None) -> float:
    """The loop-clock time ``timeout`` seconds from now (``inf`` for None).

    Raises:
        InputError: ``timeout`` breaks the rule of :func:`deepactors.limits.seconds`.
    """
    limit = seconds(timeout)
    return math.inf if limit is None else anyio.current_time() + limit


async def await_handle(handle: RunHandle) -> AgentResult:
    """Wait for a run's result; if the caller is cancelled, cancel the run first.

    The run is awaited in that case, so nothing of it outlives the caller.
    """
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

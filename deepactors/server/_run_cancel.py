"""Cancelling runs: a client that left, a cancel request, a multitask strategy.

A local run is stopped through its handle (its whole subtree is cancelled); a
run of another server process is asked of that process through the relay. A
``rollback`` also undoes the runs: an order queued behind them on the thread
takes it back to where the oldest of them started. A part of the run manager.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping

import anyio
from anyio.abc import TaskGroup
from starlette.exceptions import HTTPException

from ..actors import ThreadHandle
from ._records import RunRecord, ThreadRecord
from .relay import RunRelay

__all__ = ["RunCanceller"]


class RunCanceller:
    """Cancels runs, and rolls them back; a part of the run manager.

    Args:
        runs: The manager's runs by id.
        task_group: Owns the cancels that are not waited for.
        relay: Asks other server processes to cancel their runs (when shared).
        launch: Starts a created run (one cancelled before it started ends at once).
        handle_of: The handle of a run's thread.
    """

    __slots__ = ("_handle_of", "_launch", "_relay", "_runs", "_tg")

    def __init__(
        self,
        runs: MutableMapping[str, RunRecord],
        task_group: TaskGroup,
        relay: RunRelay,
        *,
        launch: Callable[[RunRecord], None],
        handle_of: Callable[[RunRecord], ThreadHandle],
    ) -> None:
        self._runs = runs
        self._tg = task_group
        self._relay = relay
        self._launch = launch
        self._handle_of = handle_of

    def cancel_soon(self, run: RunRecord) -> None:
        """Cancel a run without waiting (a client that left)."""
        if run.done.is_set():
            return
        if run.remote:
            self._tg.start_soon(self._relay.cancel, run.run_id, "interrupt")
            return
        self._stop(run, "interrupt")

    def _stop(self, run: RunRecord, action: str) -> None:
        """Ask a local run to stop: its subtree is cancelled, or, if it has not
        started yet, it is launched and ends as interrupted at once."""
        run.cancel_requested = action
        run.cancelled.set()
        if run.handle is not None:
            run.handle.cancel()
        self._launch(run)

    def cancel_requested(self, run_id: str, action: str) -> None:
        """Another process asks to cancel a run of this one (through the relay)."""
        run = self._runs.get(run_id)
        if run is None or run.remote or run.done.is_set():
            return
        if action not in ("interrupt", "rollback"):
            action = "interrupt"
        self._tg.start_soon(functools.partial(self.cancel, [run], action=action, wait=False))

    async def make_room(
        self, thread: ThreadRecord, inflight: list[RunRecord], strategy: str
    ) -> None:
        if strategy == "reject":
            raise HTTPException(
                409,
                f"thread {thread.name!r} is busy with run {inflight[0].run_id}; "
                "wait for it, or choose multitask_strategy enqueue, interrupt or rollback",
            )
        if strategy == "enqueue":
            return  # the thread actor's mailbox queues it
        await self.cancel(inflight, action=strategy, wait=True)

    async def cancel(self, runs: list[RunRecord], *, action: str = "interrupt", wait: bool) -> None:
        """Cancel runs (their whole subtrees); with ``rollback``, also undo them.

        A rollback queues, behind the cancelled runs, the order that takes the
        thread back to where the oldest of them started (so no run that comes
        later is undone with them), waits for it, and forgets the runs.
        """
        for run in runs:
            if run.done.is_set():
                continue
            if run.remote:  # its own process cancels it (and rolls it back)
                await self._relay.cancel(run.run_id, action)
                continue
            self._stop(run, action)
        local = [r for r in runs if not r.remote]
        with anyio.CancelScope(shield=True):
            if action == "rollback" and local:
                thread = local[0].thread
                started = [r.handle for r in local if r.handle is not None]
                if started:
                    await self._handle_of(local[0]).undo(started)
                for run in runs:
                    await run.done.wait()
                for run in local:
                    self._runs.pop(run.run_id, None)
                    if run in thread.runs:
                        thread.runs.remove(run)
            elif wait:
                for run in runs:
                    await run.done.wait()

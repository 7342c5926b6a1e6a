"""Cancelling runs: a client that left, a cancel request, a multitask strategy.

A local run is stopped through its handle (its whole subtree is cancelled); a
run of another server process is asked of that process through the relay. A
``rollback`` also undoes the runs: an order queued behind them on the thread
takes it back to where the oldest of them started. Mixed into the run manager.
"""

from __future__ import annotations

import functools

import anyio
from starlette.exceptions import HTTPException

from ._records import RunRecord, ThreadRecord
from ._run_driver import RunDriver

__all__ = ["RunCanceller"]


class RunCanceller(RunDriver):
    """Cancelling runs (mixed into ``RunManager``, which has the runs)."""

    __slots__ = ()

    runs: dict[str, RunRecord]

    def launch(self, run: RunRecord) -> None:
        """Start a run created with ``launch=False`` (see the run manager)."""
        raise NotImplementedError

    def cancel_soon(self, run: RunRecord) -> None:
        """Cancel a run without waiting (a client that left)."""
        if run.done.is_set():
            return
        if run.remote:
            self._tg.start_soon(self.relay.cancel, run.run_id, "interrupt")
            return
        self._stop(run, "interrupt")

    def _stop(self, run: RunRecord, action: str) -> None:
        """Ask a local run to stop: its subtree is cancelled, or, if it has not
        started yet, it is launched and ends as interrupted at once."""
        run.cancel_requested = action
        run.cancelled.set()
        if run.handle is not None:
            run.handle.cancel()
        self.launch(run)

    def cancel_requested(self, run_id: str, action: str) -> None:
        """Another process asks to cancel a run of this one (through the relay)."""
        run = self.runs.get(run_id)
        if run is None or run.remote or run.done.is_set():
            return
        if action not in ("interrupt", "rollback"):
            action = "interrupt"
        self._tg.start_soon(functools.partial(self.cancel, [run], action=action, wait=False))

    async def _make_room(
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
                await self.relay.cancel(run.run_id, action)
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
                    self.runs.pop(run.run_id, None)
                    if run in thread.runs:
                        thread.runs.remove(run)
                await self.refresh(thread)
            elif wait:
                for run in runs:
                    await run.done.wait()

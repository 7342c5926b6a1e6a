"""How long the server keeps finished runs in memory.

A finished run's record holds its values as JSON (and what it was created
with): kept for ``run_retention`` seconds after it ends, so a client can join it
or read its result, then let go of. What is left of a run of a saved thread is
a :class:`~._records.ForgottenRun` on its thread (its status, times, metadata,
error): its thread's values are read from the thread's checkpoint when asked
for. When runs are shared between server processes (``runs_db``), nothing is
left here of a run let go of: the shared runs database has it whole, and a
request for it adopts it again.

A thread's values are not kept here: the server reads them through the
thread's handle (``ThreadHandle.view``), whose actor keeps what it read until
the thread changes or the actor leaves, idle for the runtime's ``idle_timeout``.

One task sweeps, every half period: no timer per run, and nothing on the path
of a run but the records it already has.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping

import anyio

from ._records import FORGOTTEN_PER_THREAD, ForgottenRun, RunRecord

__all__ = ["DEFAULT_RUN_RETENTION", "Retention"]

DEFAULT_RUN_RETENTION = 60.0
"""Seconds a finished run's record (its values, its input) stays in memory."""

_MIN_PERIOD = 0.05
_MAX_PERIOD = 30.0


class Retention:
    """Lets go of finished runs, for one run manager.

    Args:
        runs: The manager's runs by id.
        run_retention: Seconds a finished run stays (None: for ever).
        remember: Keep what is left of a forgotten run of a thread (False: the
            runs are in a shared runs database, which has them whole).
    """

    def __init__(
        self,
        runs: MutableMapping[str, RunRecord],
        *,
        run_retention: float | None,
        remember: bool = True,
    ) -> None:
        self._runs = runs
        self.run_retention = run_retention
        self._remember = remember
        self._scope = anyio.CancelScope()

    @property
    def period(self) -> float | None:
        """Seconds between two sweeps (None: nothing to sweep)."""
        if self.run_retention is None:
            return None
        return min(max(self.run_retention / 2, _MIN_PERIOD), _MAX_PERIOD)

    async def run(self) -> None:
        """Sweep until :meth:`close` (a task of the app's task group)."""
        period = self.period
        if period is None:
            return
        with self._scope:
            while True:
                await anyio.sleep(period)
                self.sweep(time.time())

    def unknown(self, thread_id: str, run_id: str) -> str:
        """What a 404 for a run this process does not know says."""
        kept = self.run_retention
        return f"run {run_id!r} not found on thread {thread_id!r}" + (
            ""
            if kept is None
            else f": unknown, or it ended more than {kept:g} s ago and was forgotten"
            " (run_retention; a stateless run's record goes with its thread)"
        )

    def close(self) -> None:
        """Stop sweeping (shutdown)."""
        self._scope.cancel()

    def sweep(self, now: float) -> None:
        """Let go of what has been finished long enough at ``now``."""
        if self.run_retention is None:
            return
        cutoff = now - self.run_retention
        old = [
            run
            for run in self._runs.values()
            if run.ended and (run.finished_at or run.updated_at) <= cutoff
        ]
        for run in old:
            self.forget(run)

    def forget(self, run: RunRecord) -> None:
        """Let go of a finished run's record; keep what is left of it on its thread."""
        if self._runs.get(run.run_id) is not run:
            return  # deleted, or rolled back, meanwhile
        del self._runs[run.run_id]
        thread = run.thread
        if run in thread.runs:
            thread.runs.remove(run)
        if run.remote or thread.temporary or not self._remember:
            return
        forgotten = thread.forgotten
        forgotten[run.run_id] = ForgottenRun.of(run)
        while len(forgotten) > FORGOTTEN_PER_THREAD:
            del forgotten[next(iter(forgotten))]  # the oldest (insertion order)

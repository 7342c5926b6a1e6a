"""How long the server keeps finished runs and idle threads' values in memory.

A finished run's record holds its values as JSON (and what it was created
with): kept for ``run_retention`` seconds after it ends, so a client can join it
or read its result, then let go of. What is left of a run of a saved thread is
a :class:`~._records.ForgottenRun` on its thread (its status, times, metadata,
error): its thread's values are read from the thread's checkpoint when asked
for. When runs are shared between server processes (``runs_db``), nothing is
left here of a run let go of: the shared runs database has it whole, and a
request for it adopts it again.

A thread idle for ``idle_timeout`` seconds (no run in flight, nothing changed)
lets go of its values too (``stale``); they are read back from its checkpoint
when a request needs them.

One task sweeps both, every half period: no timer per run, and nothing on the
path of a run but the records it already has.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping

import anyio

from ._records import FORGOTTEN_PER_THREAD, ForgottenRun, RunRecord, ThreadRecord

__all__ = ["DEFAULT_RUN_RETENTION", "Retention"]

DEFAULT_RUN_RETENTION = 60.0
"""Seconds a finished run's record (its values, its input) stays in memory."""

_MIN_PERIOD = 0.05
_MAX_PERIOD = 30.0


class Retention:
    """Lets go of finished runs and idle threads' values, for one run manager.

    Args:
        runs: The manager's runs by id.
        threads: The manager's threads by id.
        run_retention: Seconds a finished run stays (None: for ever).
        idle_timeout: Seconds an idle thread keeps its values (None: for ever).
        remember: Keep what is left of a forgotten run of a thread (False: the
            runs are in a shared runs database, which has them whole).
    """

    def __init__(
        self,
        runs: MutableMapping[str, RunRecord],
        threads: MutableMapping[str, ThreadRecord],
        *,
        run_retention: float | None,
        idle_timeout: float | None,
        remember: bool = True,
    ) -> None:
        self._runs = runs
        self._threads = threads
        self.run_retention = run_retention
        self.idle_timeout = idle_timeout
        self._remember = remember
        self._scope = anyio.CancelScope()

    @property
    def period(self) -> float | None:
        """Seconds between two sweeps (None: nothing to sweep)."""
        spans = [s for s in (self.run_retention, self.idle_timeout) if s is not None]
        if not spans:
            return None
        return min(max(min(spans) / 2, _MIN_PERIOD), _MAX_PERIOD)

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
        """Let go of what has been finished or idle long enough at ``now``."""
        if self.run_retention is not None:
            cutoff = now - self.run_retention
            old = [
                run
                for run in self._runs.values()
                if run.ended and (run.finished_at or run.updated_at) <= cutoff
            ]
            for run in old:
                self.forget(run)
        if self.idle_timeout is not None:
            cutoff = now - self.idle_timeout
            for thread in self._threads.values():
                if (
                    thread.values is not None
                    and max(thread.updated_at, thread.read_at) <= cutoff
                    and thread.idle
                ):
                    thread.values = None
                    thread.stale = True

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

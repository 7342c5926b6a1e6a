"""Runs of other server processes, as this one knows them (through the relay).

A request may name a run that another process drives (``--runs-db``). Such a
run is *adopted*: it gets a :class:`RunRecord` here (``remote=True``) on its
thread's record, so every endpoint serves it as it serves a local run, and a
follower task keeps it up to date through the relay until it ends. Cancelling
it asks its own process (see :meth:`RunManager.cancel`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Protocol, final

import anyio
from anyio.abc import TaskGroup

from ...errors import DeepActorsError
from .._records import AssistantRecord, RunRecord, ThreadRecord
from ._relay import FINAL, RunRelay, SharedRun

__all__ = ["RunBook", "SharedRuns"]


class _ThreadAssistants(Protocol):
    """Which assistant's state a thread holds (the manager's thread lookup)."""

    def thread_assistant(self, thread: ThreadRecord) -> AssistantRecord: ...


class RunBook(Protocol):
    """What the run manager keeps, that adopted runs join."""

    @property
    def threads(self) -> dict[str, ThreadRecord]: ...

    @property
    def runs(self) -> dict[str, RunRecord]: ...

    @property
    def assistants(self) -> Mapping[str, AssistantRecord]: ...

    @property
    def lookup(self) -> _ThreadAssistants: ...

    async def refresh(self, thread: ThreadRecord) -> None: ...


@final
class SharedRuns:
    """Adopts and follows runs of other processes for one run manager.

    Args:
        relay: Where the other processes' runs are known.
        task_group: Owns the followers.
        book: The manager's threads and runs, which adopted runs join.
    """

    def __init__(self, relay: RunRelay, task_group: TaskGroup, book: RunBook) -> None:
        self._relay = relay
        self._tg = task_group
        self._book = book
        self._followers: set[anyio.CancelScope] = set()

    async def adopt_run(self, thread_id: str, run_id: str) -> None:
        """Adopt the run if another process has it on this thread."""
        shared = await self._relay.find(run_id)
        if shared is not None and shared.thread_id == thread_id:
            self.adopt(shared)

    async def adopt_thread(self, thread_id: str) -> bool:
        """Know a thread other processes made or ran, with its runs (False: none)."""
        found = await self._relay.find_thread(thread_id)
        if found is None:
            return False
        known = self._book.threads.get(thread_id)
        if known is None:
            self._book.threads[thread_id] = ThreadRecord(
                thread_id=thread_id, metadata=dict(found.metadata), created_at=found.created_at
            )
        else:
            # Known first through one of its runs: the thread's own metadata
            # (its owner among it) fills in what that record lacked.
            known.metadata = {**found.metadata, **known.metadata}
        forgotten = self._book.threads[thread_id].forgotten
        for shared in found.runs:
            # A run this process forgot (past its retention) is listed from what
            # is left of it: adopted again, it would be listed twice.
            if shared.run_id not in forgotten:
                self.adopt(shared)
        return True

    def adopt(self, shared: SharedRun) -> RunRecord:
        """The record of a run driven by another process, followed while it runs."""
        book = self._book
        known = book.runs.get(shared.run_id)
        if known is not None:
            return known
        thread = book.threads.get(shared.thread_id)
        if thread is None:
            thread = ThreadRecord(thread_id=shared.thread_id, created_at=shared.created_at)
            book.threads[thread.thread_id] = thread
        run = RunRecord(
            run_id=shared.run_id,
            thread=thread,
            assistant=book.assistants.get(shared.graph_id) or book.lookup.thread_assistant(thread),
            kwargs_of=shared.kwargs,
            metadata=shared.metadata,
            multitask_strategy=shared.multitask_strategy,
            status=shared.status,
            created_at=shared.created_at,
            updated_at=shared.updated_at,
            remote=True,
        )
        thread.graph_id = thread.graph_id or run.assistant.graph_id
        thread.runs.append(run)
        thread.runs.sort(key=lambda r: r.created_at)
        book.runs[run.run_id] = run
        if shared.status in FINAL:
            run.result = shared.result or {}
            run.finished_at = shared.updated_at
            run.done.set()
        else:
            self._tg.start_soon(self._follow, run)
        return run

    async def _follow(self, run: RunRecord) -> None:
        scope = anyio.CancelScope()
        self._followers.add(scope)
        try:
            with scope:
                await self._relay.follow(run)
        except DeepActorsError as exc:
            # Never into the manager's task group (it would end the server):
            # the run ends here as an error that says what happened.
            run.status = "error"
            run.result = {"__error__": {"error": type(exc).__name__, "message": str(exc)}}
            run.finished_at = run.updated_at = time.time()
            run.done.set()
        finally:
            self._followers.discard(scope)
            if run.done.is_set() and not run.thread.inflight:
                # The thread's values as its run left them (in the shared checkpoint).
                with anyio.CancelScope(shield=True), contextlib.suppress(DeepActorsError):
                    await self._book.refresh(run.thread)

    def close(self) -> None:
        """Stop following (shutdown): the runs go on in their own processes."""
        for scope in list(self._followers):
            scope.cancel()

"""Where runs are known beyond this process: the relay between server processes.

A :class:`RunManager` drives its own runs in its own runtime, and tells its
relay what happens to them: a run was created, started, streamed an event,
finished. The relay is what lets *another* process find such a run, follow it
(its status, its result, its events as SSE frames) and cancel it.

- :class:`LocalRelay` (one process, the default) does nothing: every run is
  local, nothing is shared, no database is asked anything.
- ``PgRelay`` (``deepactors serve --runs-db postgresql://...``) shares runs
  through PostgreSQL tables, with ``LISTEN``/``NOTIFY`` to wake the processes
  concerned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, final

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from ..._core.jsonvalue import JSONObject
from ...events import Event
from .._records import RunRecord
from .._wire_json import GivenModes, RunStatus
from ._frame_log import FrameLog, LogSink

__all__ = ["FINAL", "CancelHandler", "LocalRelay", "RunRelay", "SharedRun", "SharedThread"]

FINAL: frozenset[str] = frozenset({"error", "success", "timeout", "interrupted"})
"""Statuses a run does not leave."""

CancelHandler = Callable[[str, str], None]
"""Called in the process that drives a run when another asks to cancel it:
``(run_id, action)`` with action ``interrupt`` or ``rollback``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedRun:
    """A run as another process recorded it.

    Attributes:
        result: The final values as JSON (``__error__`` if it failed), once final.
    """

    run_id: str
    thread_id: str
    graph_id: str
    status: RunStatus
    metadata: dict[str, object]
    kwargs: dict[str, object]
    multitask_strategy: str
    created_at: float
    updated_at: float
    result: JSONObject | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedThread:
    """A thread as the processes recorded it: made by one, or run by some.

    Attributes:
        runs: Its recorded runs, oldest first.
    """

    thread_id: str
    metadata: dict[str, object]
    created_at: float
    runs: list[SharedRun]


class RunRelay(Protocol):
    """What a run manager tells other processes, and asks of them."""

    @property
    def shared(self) -> bool:
        """Whether other processes may hold runs (False: every run is local)."""
        ...

    async def serve(
        self, on_cancel: CancelHandler, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Deliver what other processes ask of this one's runs, until cancelled
        (``task_status.started()`` once it can be used)."""
        ...

    async def created(self, run: RunRecord) -> None:
        """A run was created here: known to other processes once this returns."""
        ...

    def started(self, run: RunRecord) -> None:
        """The run has begun (its first event)."""
        ...

    def event(self, run: RunRecord, event: Event) -> None:
        """One event of a run of this process, for followers elsewhere."""
        ...

    def finished(self, run: RunRecord, values: JSONObject) -> None:
        """The run ended (``run.status`` is final) with these values as JSON."""
        ...

    async def find(self, run_id: str) -> SharedRun | None:
        """A run of another process (None: unknown)."""
        ...

    async def thread_created(self, thread_id: str, metadata: dict[str, object]) -> None:
        """A thread was made here (known to other processes once this returns)."""
        ...

    async def thread_deleted(self, thread_id: str) -> None:
        """A thread was deleted here, with its runs."""
        ...

    async def find_thread(self, thread_id: str) -> SharedThread | None:
        """A thread some process made or ran (None: unknown)."""
        ...

    async def follow(self, run: RunRecord) -> None:
        """Keep a run of another process up to date until it ends.

        Sets its status and ``updated_at``, passes frames to its subscribers'
        watches, and at the end sets ``result``, closes the subscribers and
        sets ``done``.
        """
        ...

    async def watch(
        self,
        run: RunRecord,
        stream: MemoryObjectSendStream[Event | bytes],
        modes: GivenModes,
        subgraphs: bool,
    ) -> None:
        """Receive a run of another process's stream as SSE frames from now on."""
        ...

    async def cancel(self, run_id: str, action: str) -> None:
        """Ask the process that drives a run to cancel it."""
        ...

    def log_sink(self, run: RunRecord) -> LogSink | None:
        """Where the frame log of a resumable run of this process is copied
        for other processes (None: nowhere)."""
        ...

    async def log_of(self, run: RunRecord, max_bytes: int) -> FrameLog | None:
        """A copy, kept up to date, of the frame log of a resumable run of
        another process (None: none is kept)."""
        ...

    async def aclose(self) -> None:
        """Write what is pending and let go of connections."""
        ...

    def not_ready(self) -> str | None:
        """Why runs cannot be shared now (its database is unreachable), or None."""
        ...


@final
class LocalRelay:
    """One process: nothing to share, nothing to ask (no I/O at all)."""

    shared = False

    async def serve(
        self, on_cancel: CancelHandler, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()

    async def created(self, run: RunRecord) -> None:
        return

    def started(self, run: RunRecord) -> None:
        return

    def event(self, run: RunRecord, event: Event) -> None:
        return

    def finished(self, run: RunRecord, values: JSONObject) -> None:
        return

    async def find(self, run_id: str) -> SharedRun | None:
        return None

    async def thread_created(self, thread_id: str, metadata: dict[str, object]) -> None:
        return

    async def thread_deleted(self, thread_id: str) -> None:
        return

    async def find_thread(self, thread_id: str) -> SharedThread | None:
        return None

    async def follow(self, run: RunRecord) -> None:
        raise AssertionError("a local relay has no runs of other processes")

    async def watch(
        self,
        run: RunRecord,
        stream: MemoryObjectSendStream[Event | bytes],
        modes: GivenModes,
        subgraphs: bool,
    ) -> None:
        raise AssertionError("a local relay has no runs of other processes")

    async def cancel(self, run_id: str, action: str) -> None:
        raise AssertionError("a local relay has no runs of other processes")

    def log_sink(self, run: RunRecord) -> LogSink | None:
        return None

    async def log_of(self, run: RunRecord, max_bytes: int) -> FrameLog | None:
        raise AssertionError("a local relay has no runs of other processes")

    async def aclose(self) -> None:
        return

    def not_ready(self) -> str | None:
        return None

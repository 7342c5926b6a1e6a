"""Threads' time to live: threads idle past their ``ttl`` are deleted (or compacted), by a sweep.

A thread's ``ttl`` (the SDKs' ``threads.create(ttl=)`` / ``update(ttl=)``, in
minutes; or the server's default, ``serve --thread-ttl`` or langgraph.json's
``checkpointer.ttl.default_ttl``) counts from its last change (``updated_at``:
made, patched, its state updated, a run ended), so a thread in use never
expires and a run in flight is never cut short. One task sweeps every
``sweep`` seconds (``checkpointer.ttl.sweep_interval_minutes``): each expired
thread is deleted as ``DELETE /threads/{id}`` deletes it (its checkpoints, its
runs' records, its metadata), one at a time and off the path of any request. A
thread whose strategy is ``keep_latest`` is kept, its history dropped and its
latest state kept (as ``threads.prune(strategy="keep_latest")`` does), once per
change: it is compacted again only after it changes again.

With a runs database (several server processes), another process may have run
the thread since this one last saw it: its last checkpoint's time is read
before it is deleted, and a thread changed since is kept.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Protocol, final

import anyio

from .._core.logs import get_logger
from ..actors import ThreadHandle
from ..errors import ConfigurationError, DeepActorsError, PersistenceError
from ._records import ThreadRecord
from ._wire_json import TTLStrategy

__all__ = ["DEFAULT_THREAD_TTL_SWEEP", "ThreadExpiry", "ThreadTTL"]

DEFAULT_THREAD_TTL_SWEEP = 300.0
"""Seconds between two sweeps for expired threads (LangGraph's default too)."""


@final
@dataclass(frozen=True, slots=True)
class ThreadTTL:
    """A server's time to live for threads made without one, checked once where it is made.

    Attributes:
        seconds: Seconds a thread lives after its last change (None: until deleted).
        strategy: What happens to it then: ``"delete"``, or ``"keep_latest"``
            (its history dropped, its latest state kept).
        sweep: Seconds between two sweeps for expired threads.

    Raises:
        ConfigurationError: A number of seconds that is not above 0 (NaN
            too), or another strategy. The message names the server setting.
    """

    seconds: float | None = None
    strategy: TTLStrategy = "delete"
    sweep: float = DEFAULT_THREAD_TTL_SWEEP

    def __post_init__(self) -> None:
        if self.strategy not in ("delete", "keep_latest"):
            raise ConfigurationError(
                f"thread_ttl_strategy: 'delete' or 'keep_latest', not {self.strategy!r}"
            )
        for name, seconds in (("thread_ttl", self.seconds), ("thread_ttl_sweep", self.sweep)):
            if seconds is not None and not 0 < seconds < math.inf:  # NaN too
                raise ConfigurationError(f"{name}: seconds above 0, not {seconds!r}")


_log = get_logger("deepactors.server")


class _LastChange(Protocol):
    async def last_change(self, thread: ThreadRecord) -> float | None: ...


class _Threads(Protocol):
    threads: dict[str, ThreadRecord]

    @property
    def lookup(self) -> _LastChange: ...

    async def delete_thread(self, thread: ThreadRecord) -> None: ...

    def handle(self, thread: ThreadRecord) -> ThreadHandle: ...


class ThreadExpiry:
    """Deletes the threads of one run manager whose time to live has passed.

    Args:
        manager: The run manager (its threads, and how it deletes one).
        sweep: Seconds between two sweeps (checked by :class:`ThreadTTL`).
        confirm: Read a candidate's last checkpoint time before deleting it
            (threads shared with other processes).
    """

    def __init__(self, manager: _Threads, *, sweep: float, confirm: bool) -> None:
        self._manager = manager
        self._sweep = sweep
        self._confirm = confirm
        self._scope = anyio.CancelScope()

    async def run(self) -> None:
        """Sweep until :meth:`close` (a task of the app's task group)."""
        with self._scope:
            while True:
                await anyio.sleep(self._sweep)
                await self.sweep(time.time())

    def close(self) -> None:
        """Stop sweeping (shutdown)."""
        self._scope.cancel()

    async def sweep(self, now: float) -> list[str]:
        """Delete the threads expired at ``now``; their ids."""
        expired = [
            thread
            for thread in self._manager.threads.values()
            if not thread.temporary
            and (expires := thread.expires_at) is not None
            and expires <= now
            and thread.idle
            and (thread.compacted_at is None or thread.compacted_at < thread.updated_at)
        ]
        deleted: list[str] = []
        for thread in expired:
            try:
                if self._confirm:
                    changed = await self._manager.lookup.last_change(thread)
                    if changed is not None and changed > thread.updated_at:
                        thread.updated_at = changed  # run elsewhere since: not expired yet
                        continue
                if not thread.idle or self._manager.threads.get(thread.thread_id) is not thread:
                    continue  # a run started, or it was deleted, meanwhile
                if thread.ttl_strategy == "keep_latest":
                    await self._compact(thread)
                    continue
                await self._manager.delete_thread(thread)
            except (PersistenceError, OSError) as exc:
                # The next sweep tries again; the thread stays whole meanwhile.
                _log.warning("expired thread not deleted", thread_id=thread.name, error=str(exc))
                continue
            deleted.append(thread.name)
            _log.info(
                "expired thread deleted", thread_id=thread.name, ttl_minutes=(thread.ttl or 0) / 60
            )
        return deleted

    async def _compact(self, thread: ThreadRecord) -> None:
        """Keep only the thread's latest state; not again until it changes."""
        seen = thread.updated_at
        try:
            dropped = await self._manager.handle(thread).keep_latest()
        except PersistenceError:
            raise
        except DeepActorsError as exc:
            # Its state would not read back from one record, or its checkpointer
            # cannot rewrite: kept whole, and not tried again until it changes.
            _log.warning("expired thread not compacted", thread_id=thread.name, error=str(exc))
            dropped = 0
        thread.compacted_at = seen
        if dropped:
            _log.info("expired thread compacted", thread_id=thread.name, records_dropped=dropped)

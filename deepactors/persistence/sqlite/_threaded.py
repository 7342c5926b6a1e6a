"""The trio side of the SQLite connection: ``sqlite3`` on a few threads per run.

aiosqlite only works on asyncio (:mod:`._aiosqlite`), so on trio a
:class:`~._conn.Database` drives a plain ``sqlite3`` connection from a call thread
(:class:`~deepactors._core.trio_loop.CallThread`). A run's connections share
at most :data:`_POOL_SIZE` such threads, each connection always the same one, so
a run with hundreds of checkpointers still uses a bounded number of threads and
each connection's calls run in order, one at a time (which is what makes
``check_same_thread=False`` safe).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from ..._core.loops import LoopRun, current_run
from ..._core.trio_loop import CallThread
from ._aiosqlite import ConnectionClosed

__all__ = ["ThreadConnection"]

T = TypeVar("T")

_POOL_SIZE = 4
"""Threads a trio run's SQLite connections share at most (each connection keeps one)."""


class _Pooled:
    """A connection thread of one trio run, and how many connections use it."""

    __slots__ = ("thread", "users")

    def __init__(self) -> None:
        self.thread = CallThread("deepactors-sqlite")
        self.users = 0


# Each run touches only its own entry (a run whose entry another run cleans up
# is over), and single dict operations are atomic: no lock on the event loop.
_POOLS: dict[LoopRun, list[_Pooled]] = {}


def _take_thread(run: LoopRun) -> _Pooled:
    pool = _POOLS.setdefault(run, [])
    if len(pool) < _POOL_SIZE:
        pooled = _Pooled()
        pool.append(pooled)
    else:
        pooled = min(pool, key=lambda p: p.users)
    pooled.users += 1
    return pooled


def _give_back(run: LoopRun, pooled: _Pooled) -> None:
    pooled.users -= 1
    if pooled.users > 0:
        return
    pooled.thread.stop()
    pool = _POOLS.get(run, [])
    if pooled in pool:
        pool.remove(pooled)
    if not pool:
        _POOLS.pop(run, None)


class ThreadConnection:
    """A ``sqlite3`` connection driven from one thread, one call at a time (trio).

    The run's connections share a few threads (:class:`~deepactors._core.trio_loop.CallThread`),
    each connection always the same one, so its calls run in order, one at a
    time; a call wakes the run once: a third of the CPU of a hop through
    anyio's worker threads, which a checkpoint after every step pays each time.
    """

    def __init__(self, raw: sqlite3.Connection, run: LoopRun, pooled: _Pooled) -> None:
        self._raw = raw
        self._run = run
        self._pooled = pooled
        self._closed = False  # read and set in the connection's thread

    @classmethod
    async def open(
        cls, path: str, prepare: Callable[[sqlite3.Connection], None], *, timeout: float
    ) -> ThreadConnection:
        def connect() -> sqlite3.Connection:
            raw = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            try:
                prepare(raw)
            except BaseException:
                raw.close()
                raise
            return raw

        run = current_run()
        pooled = _take_thread(run)
        try:
            raw = await pooled.thread.run(connect)
        except BaseException:
            _give_back(run, pooled)
            raise
        return cls(raw, run, pooled)

    def _guarded(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # An operation queued behind the close has done nothing yet: the caller
        # retries it on a new connection.
        if self._closed:
            raise ConnectionClosed
        return fn(self._raw)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # Not abandoned on cancel: the transaction finishes in the thread and
        # the caller is cancelled at its next checkpoint.
        return await self._pooled.thread.run(functools.partial(self._guarded, fn))

    def _close_raw(self) -> None:
        if not self._closed:
            self._closed = True
            self._raw.close()

    async def aclose(self) -> None:
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            await self._pooled.thread.run(self._close_raw)
        _give_back(self._run, self._pooled)

    async def aclose_stale(self) -> None:
        # The thread reports to the ended run: close from a worker thread here.
        if self._closed:
            return
        await anyio.to_thread.run_sync(self._close_raw)
        _give_back(self._run, self._pooled)

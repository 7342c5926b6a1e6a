"""The asyncio side of the SQLite connection: aiosqlite, and the few asyncio calls it needs.

A driver, and so one of the two library modules allowed to import :mod:`asyncio`
(ruff bans it elsewhere; the other is ``deepactors._core.loops``, the seam for what
differs between event loops): aiosqlite only works on asyncio, and waiting out
a native ``task.cancel()`` (:func:`settle`) has no loop-agnostic spelling.

Every operation is one function run in aiosqlite's own thread (its
``_execute``), not a sequence of ``execute``/``commit`` awaits: one thread hop
per ``put`` instead of four, and no other task's statement can land inside our
transaction. ``_execute`` and ``_conn`` are private, but have had the same
shape since aiosqlite 0.1; the test suite exercises them on every run.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiosqlite
import anyio

__all__ = ["AiosqliteConnection", "ConnectionClosed", "settle"]

T = TypeVar("T")


class ConnectionClosed(Exception):
    """The connection was closed before the operation started; retry on a new one."""


async def settle(job: Awaitable[T]) -> T:
    """Await ``job`` to its end, even through native cancellation, then report.

    anyio's ``CancelScope(shield=True)`` holds back anyio's own cancellation,
    but not a native ``task.cancel()`` (``asyncio.timeout``, ``wait_for``, a
    server cancelling its handlers on shutdown): that one is thrown into the
    await at once. Work handed to aiosqlite's thread cannot be recalled, so
    unwinding there would let it finish later behind the caller's back. Here
    the job runs as its own task, and the caller's cancellation (the first, if
    several) is re-raised only once the job has finished: never swallowed, and
    never ahead of the write it interrupted.
    """
    task = asyncio.ensure_future(job)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            # shield: cancelling the caller leaves ``task`` running.
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.cancelled():
                raise  # the job itself was cancelled: the loop is shutting down
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation wins
        raise cancelled
    return task.result()


def _queue(
    db: aiosqlite.Connection, fn: Callable[[], T], loop: asyncio.AbstractEventLoop
) -> asyncio.Future[T]:
    """Queue ``fn`` in the connection's thread as aiosqlite's ``_execute`` does."""
    future: asyncio.Future[T] = loop.create_future()
    db._tx.put_nowait((future, fn))
    return future


async def _settled(
    db: aiosqlite.Connection, fn: Callable[[], T], loop: asyncio.AbstractEventLoop
) -> T:
    """:func:`settle` for one call queued in the connection's thread, without a task.

    Awaited directly (a put per step pays every loop turn here). A native
    cancellation cancels the future, not the call: the caller then waits for
    a call queued behind it, which the thread runs after it, and re-raises.
    """
    future = _queue(db, fn, loop)
    try:
        return await future
    except asyncio.CancelledError:
        if not future.cancelled():
            raise  # the call itself was cancelled: the loop is shutting down
        await settle(_queue(db, _nothing, loop))
        raise


def _nothing() -> None:
    pass


def _join_thread(db: aiosqlite.Connection) -> None:
    # aiosqlite >= 0.20 runs its worker in ``_thread``; before, the connection
    # was the thread.
    thread = getattr(db, "_thread", db)
    if isinstance(thread, threading.Thread) and thread.is_alive():
        thread.join()


async def _close(db: aiosqlite.Connection) -> None:
    await db.close()
    # close() returns when the thread has answered, a moment before the thread
    # ends: wait for that too, so a closed connection leaves no thread behind
    # (joined in a worker thread, not on the loop).
    await anyio.to_thread.run_sync(_join_thread, db)


async def _connect(
    path: str, prepare: Callable[[sqlite3.Connection], None], timeout: float
) -> aiosqlite.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves, never sqlite3's
    # implicit ones.
    db = await aiosqlite.connect(path, timeout=timeout, isolation_level=None)
    try:
        await db._execute(prepare, db._conn)  # type: ignore[no-untyped-call]
    except BaseException:
        await _close(db)
        raise
    return db


class AiosqliteConnection:
    """One aiosqlite connection, used from asyncio.

    Operations are serialised by aiosqlite's queue, in its one thread. Once an
    operation is queued it runs to the end even if the caller is cancelled (it
    cannot be pulled back out of the thread), so the caller waits for it
    whatever cancellation arrives (see :func:`settle`): it sees the operation's
    result, or its cancellation once the operation is over. That is also what
    a worker thread does on trio.
    """

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._raw: sqlite3.Connection = db._conn
        self._closed = False
        # The loop of the run that opened it, the only one that uses it (a
        # connection per run): looked up once, not per call.
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(
        cls, path: str, prepare: Callable[[sqlite3.Connection], None], *, timeout: float
    ) -> AiosqliteConnection:
        """Connect, then run ``prepare`` (pragmas, schema) in the connection's thread.

        Cancelled meanwhile, it still finishes, closes what it opened (the
        connection and its thread), then raises the cancellation.
        """
        job = asyncio.ensure_future(_connect(path, prepare, timeout))
        try:
            with anyio.CancelScope(shield=True):
                db = await settle(job)
        except asyncio.CancelledError:
            if job.done() and not job.cancelled() and job.exception() is None:
                with anyio.CancelScope(shield=True):
                    await settle(_close(job.result()))
            raise
        return cls(db)

    def _guarded(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # Runs in aiosqlite's thread. A job queued before ``aclose`` but not yet
        # started sees the flag and is retried on a new connection: safe, since
        # it has done nothing yet.
        if self._closed:
            raise ConnectionClosed
        return fn(self._raw)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` in the connection's thread and return its result.

        Raises:
            ConnectionClosed: The connection was closed first.
        """
        if self._closed:
            raise ConnectionClosed
        # Queued as aiosqlite's ``_execute`` queues it, but awaited without the
        # task ``settle`` would make for it: a put per step pays this.
        with anyio.CancelScope(shield=True):
            result = await _settled(self._db, functools.partial(self._guarded, fn), self._loop)
        return result

    async def aclose(self) -> None:
        """Close the connection and stop its thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await settle(_close(self._db))

    def _close_stale(self) -> None:
        asyncio.run(self._db.close())
        _join_thread(self._db)

    async def aclose_stale(self) -> None:
        """Close a connection left open by an event-loop run that has ended.

        Its thread outlives the loop, but aiosqlite's ``close`` is a coroutine
        and we may be on trio now: run it on a throwaway asyncio loop in a worker
        thread.
        """
        if self._closed:
            return
        self._closed = True
        await anyio.to_thread.run_sync(self._close_stale)

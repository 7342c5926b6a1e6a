"""A put cancelled while in flight: the caller unwinds only once the write is settled.

On asyncio the cancellation may be native (``task.cancel()``, from
``asyncio.timeout``, ``wait_for`` or a server shutting down), which anyio's
shielded scope cannot hold back; on trio it is a cancel scope. Either way the
put has been handed to the connection's thread and cannot be recalled, so the
caller must not see its cancellation until that write has finished: otherwise
the write lands later, behind the back of a caller that has already moved on
(read the thread, resumed it elsewhere...).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import anyio
import pytest
import sniffio

from deepactors.persistence import CheckpointWrite, SqliteCheckpointer


def write(step: int) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="messages", data={"step": step})


def count_rows(file: Path) -> int:
    with sqlite3.connect(file) as raw:
        (n,) = raw.execute("SELECT count(*) FROM checkpoint_records").fetchone()
    raw.close()
    return int(n)


@pytest.mark.parametrize("batch", [1, 3])
async def test_a_cancelled_put_in_flight_lands_before_the_caller_unwinds(
    tmp_path: Path, batch: int
) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.read("t")  # open first, so the put goes straight to the thread
        # Another connection holds the write lock: the put waits in SQLite's busy
        # handler, inside the connection's thread, until the timer lets go.
        blocker = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
        await anyio.to_thread.run_sync(blocker.execute, "BEGIN IMMEDIATE")
        release = threading.Timer(0.3, blocker.execute, ("COMMIT",))
        records = [write(i) for i in range(batch)]
        try:
            with anyio.fail_after(10):
                if sniffio.current_async_library() == "asyncio":
                    task = asyncio.get_running_loop().create_task(cp.put("t", records))
                    await anyio.wait_all_tasks_blocked()
                    release.start()
                    # Twice, as a server shutdown may: the second one used to
                    # break through anyio's shield.
                    task.cancel()
                    await asyncio.sleep(0)
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                else:
                    with anyio.CancelScope() as scope:
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(cp.put, "t", records)
                            await anyio.wait_all_tasks_blocked()
                            release.start()
                            scope.cancel()
                # The caller has unwound: the write is already in the file.
                assert await anyio.to_thread.run_sync(count_rows, file) == batch
        finally:
            release.join()
            blocker.close()
        assert [r.step for r in await cp.read("t")] == list(range(batch))
        # The connection is still usable after the cancelled put.
        await cp.put("t", [write(9)])
        assert len(await cp.read("t")) == batch + 1


def aiosqlite_threads() -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if getattr(getattr(t, "_target", None), "__name__", "") == "_connection_worker_thread"
    ]


async def test_a_put_cancelled_while_its_connection_opens_leaves_nothing_open(
    tmp_path: Path,
) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.read("t")  # create the schema
    threads_before = len(aiosqlite_threads())
    cp = SqliteCheckpointer(file)
    # Opening takes the write lock to check the schema: held elsewhere, the open
    # is in flight (in the connection's thread) when the cancellation comes.
    blocker = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
    await anyio.to_thread.run_sync(blocker.execute, "BEGIN IMMEDIATE")
    release = threading.Timer(0.3, blocker.execute, ("COMMIT",))
    try:
        with anyio.fail_after(10):
            if sniffio.current_async_library() == "asyncio":
                task = asyncio.get_running_loop().create_task(cp.put("t", [write(0)]))
                await anyio.wait_all_tasks_blocked()
                release.start()
                task.cancel()
                await asyncio.sleep(0)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(cp.put, "t", [write(0)])
                        await anyio.wait_all_tasks_blocked()
                        release.start()
                        scope.cancel()
    finally:
        release.join()
        blocker.close()
    # Nothing was half-opened: no aiosqlite thread left, and the next call opens afresh.
    assert len(aiosqlite_threads()) == threads_before
    async with cp:
        await cp.put("t", [write(1)])
        assert [r.step for r in await cp.read("t")] == [1]
    assert len(aiosqlite_threads()) == threads_before

"""SQLite files: persistence across connections and loops, and the errors for bad files."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path

import anyio
import pytest
import sniffio

from deepactors.errors import (
    CheckpointCorrupt,
    CheckpointError,
    CheckpointSchemaMismatch,
    CheckpointUnavailable,
    ConfigurationError,
    PersistenceError,
    StoreCorrupt,
)
from deepactors.persistence import (
    CHECKPOINT_SCHEMA_VERSION,
    CheckpointWrite,
    SqliteCheckpointer,
    SqliteStore,
)


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="messages", data=dict(data))


def aiosqlite_threads() -> list[threading.Thread]:
    # aiosqlite's worker threads are plain, non-daemon threads running its worker.
    return [
        t
        for t in threading.enumerate()
        if getattr(t, "_target", None) is not None
        and getattr(t._target, "__name__", "") == "_connection_worker_thread"  # type: ignore[attr-defined]
    ]


async def test_records_survive_close_and_reopen(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(0, text="one"), write(0, text="two")])
    async with SqliteCheckpointer(file) as again:
        assert [r.data["text"] for r in await again.read("t")] == ["one", "two"]
        await again.put("t", [write(1, text="three")])
        assert [r.seq for r in await again.read("t")] == [1, 2, 3]


async def test_uses_wal_and_records_the_schema_version(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(0, text="x" * 100)])
    with sqlite3.connect(file) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("SELECT value FROM meta WHERE key = 'checkpoints'").fetchone() == (
            str(CHECKPOINT_SCHEMA_VERSION),
        )
        # Compact JSON text: the stored bytes are the JSON's bytes.
        (data,) = raw.execute("SELECT data FROM checkpoint_records").fetchone()
        assert data == json.dumps({"text": "x" * 100}, separators=(",", ":"))
    raw.close()


def test_one_checkpointer_serves_an_asyncio_run_then_a_trio_run(tmp_path: Path) -> None:
    # The sync wrapper runs each call in a fresh event loop; the same object must
    # follow, and each run must leave no connection (or aiosqlite thread) behind.
    cp = SqliteCheckpointer(tmp_path / "cp.db")
    threads_before = len(aiosqlite_threads())

    async def put(step: int) -> list[int]:
        await cp.put("t", [write(step)])
        return [r.step for r in await cp.read("t")]

    assert anyio.run(put, 1, backend="asyncio") == [1]
    assert len(aiosqlite_threads()) == threads_before
    assert anyio.run(put, 2, backend="trio") == [1, 2]
    assert anyio.run(put, 3, backend="asyncio") == [1, 2, 3]
    assert anyio.run(put, 4, backend="trio") == [1, 2, 3, 4]
    assert len(aiosqlite_threads()) == threads_before


def test_a_connection_left_by_a_loop_closed_without_cleanup_is_replaced(tmp_path: Path) -> None:
    # A loop closed without cancelling its tasks never runs the closer: the next
    # run closes the stale aiosqlite connection and opens its own.
    cp = SqliteCheckpointer(tmp_path / "cp.db")
    threads_before = len(aiosqlite_threads())
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(cp.put("t", [write(1)]))
    finally:
        # Cancel the closer by hand without letting it run, as a careless host would.
        for task in asyncio.all_tasks(loop):
            task.cancel()
            task._log_destroy_pending = False  # type: ignore[attr-defined]
        loop.close()
    assert len(aiosqlite_threads()) == threads_before + 1

    async def read() -> list[int]:
        return [r.step for r in await cp.read("t")]

    assert anyio.run(read, backend="trio") == [1]
    assert len(aiosqlite_threads()) == threads_before


async def test_parent_folders_are_created(tmp_path: Path) -> None:
    file = tmp_path / "a" / "b" / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(0)])
    assert file.exists()


async def test_another_schema_version_is_named_with_the_file(tmp_path: Path) -> None:
    file = tmp_path / "old.db"
    with sqlite3.connect(file) as raw:
        raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        raw.execute("INSERT INTO meta VALUES ('checkpoints', '999')")
    raw.close()
    async with SqliteCheckpointer(file) as cp:
        with pytest.raises(CheckpointSchemaMismatch) as info:
            await cp.read("t")
    message = str(info.value)
    assert str(file) in message
    assert "999" in message
    assert f"version {CHECKPOINT_SCHEMA_VERSION}" in message
    assert isinstance(info.value, CheckpointCorrupt)


async def test_a_file_that_is_not_sqlite_is_corrupt(tmp_path: Path) -> None:
    file = tmp_path / "garbage.db"
    file.write_bytes(b"this is not a database, just some bytes\x00\xff" * 200)
    async with SqliteCheckpointer(file) as cp:
        with pytest.raises(CheckpointCorrupt, match="not a SQLite database") as info:
            await cp.put("t", [write(0)])
        assert str(file) in str(info.value)
        # Still the same error on the next call: nothing half-open stays behind.
        with pytest.raises(CheckpointCorrupt):
            await cp.threads()
    # The store reports its own kind of error (it used to say "checkpoint").
    async with SqliteStore(file) as store:
        with pytest.raises(StoreCorrupt, match="not a SQLite database") as store_info:
            await store.get(("ns",), "k")
    assert isinstance(store_info.value, PersistenceError)
    assert not isinstance(store_info.value, CheckpointError)


async def test_a_row_with_broken_json_names_file_thread_and_seq(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("thread-7", [write(0), write(1)])
        await cp.aclose()
        with sqlite3.connect(file) as raw:
            raw.execute("UPDATE checkpoint_records SET data = '{\"broken' WHERE seq = 2")
        raw.close()
        with pytest.raises(CheckpointCorrupt) as info:
            await cp.read("thread-7")
        message = str(info.value)
        assert str(file) in message
        assert "'thread-7'" in message
        assert "seq 2" in message
        # The intact prefix of the thread is still readable.
        assert [r.seq for r in await cp.read("thread-7", upto_seq=1)] == [1]


async def test_checkpointer_and_store_can_share_a_file(tmp_path: Path) -> None:
    file = tmp_path / "shared.db"
    async with SqliteCheckpointer(file) as cp, SqliteStore(file) as store:
        await cp.put("t", [write(0)])
        await store.put(("ns",), "k", {"v": 1})
        assert len(await cp.read("t")) == 1
        item = await store.get(("ns",), "k")
        assert item is not None
        assert item.value == {"v": 1}


async def test_busy_timeout_is_how_long_a_call_waits_for_another_writer(tmp_path: Path) -> None:
    file = tmp_path / "locked.db"
    async with SqliteCheckpointer(file, busy_timeout=0.2) as cp:
        await cp.put("t", [write(0)])
        writer = sqlite3.connect(file, isolation_level=None)
        try:
            writer.execute("BEGIN IMMEDIATE")  # another process's write, never ending
            with anyio.fail_after(10), pytest.raises(CheckpointUnavailable) as caught:
                await cp.put("t", [write(1)])
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert "(more than 0.2 s)" in str(caught.value), caught.value
        await cp.put("t", [write(1)])  # the lock gone, the same put lands
        assert len(await cp.read("t")) == 2


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), float("inf")])
def test_a_busy_timeout_that_is_not_above_zero_is_refused(tmp_path: Path, seconds: float) -> None:
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        SqliteCheckpointer(tmp_path / "a.db", busy_timeout=seconds)
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        SqliteStore(tmp_path / "a.db", busy_timeout=seconds)


async def test_many_concurrent_first_uses_open_one_connection(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(tmp_path / "cp.db")
    async with cp, anyio.create_task_group() as tg:
        for i in range(30):
            tg.start_soon(cp.put, f"t{i % 3}", [write(i)])
    async with cp:
        infos = await cp.threads()
    assert [(i.thread_id, i.records) for i in infos] == [("t0", 10), ("t1", 10), ("t2", 10)]


async def test_a_put_cancelled_while_running_still_lands_whole(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.read("t")  # open first, so the put below starts at once
        with anyio.CancelScope() as scope:
            scope.cancel()
            # Already cancelled: it either does not start or runs to the end.
            await cp.put("t", [write(0), write(1)])
        assert len(await cp.read("t")) in (0, 2)


async def test_unsupported_loop_is_a_clear_error(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(tmp_path / "cp.db")
    # trio names itself in sniffio's thread-local, asyncio through the context var.
    before = sniffio.thread_local.name
    token = sniffio.current_async_library_cvar.set("curio")
    sniffio.thread_local.name = "curio" if before is not None else None
    try:
        with pytest.raises(CheckpointError, match="asyncio or trio"):
            await cp.read("t")
    finally:
        sniffio.thread_local.name = before
        sniffio.current_async_library_cvar.reset(token)

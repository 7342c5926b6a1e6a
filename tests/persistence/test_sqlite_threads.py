"""One SQLite checkpointer or store used from several threads, each running its own loop.

This is what the sync ``agent.invoke`` does when a threaded web server calls it
concurrently: every call is an ``anyio.run`` in its own thread, all sharing one
checkpointer object.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors.persistence import (
    CHECKPOINT_SCHEMA_VERSION,
    CheckpointWrite,
    SqliteCheckpointer,
    SqliteStore,
)

PUTS = 60  # per thread; half single-record puts, half two-record batches


def write(step: int, who: str) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="messages", data={"who": who})


def backend_of(anyio_backend: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(anyio_backend, tuple):
        return anyio_backend[0], dict(anyio_backend[1])
    return anyio_backend, {}


def run_in_threads(
    jobs: list[tuple[str, dict[str, Any], Callable[[], Awaitable[object]]]],
) -> None:
    """Run each job in its own thread and event loop, all at once; re-raise any failure."""
    errors: list[BaseException] = []

    def target(backend: str, options: dict[str, Any], job: Callable[[], Awaitable[object]]) -> None:
        async def main() -> None:
            await job()

        try:
            anyio.run(main, backend=backend, backend_options=options)
        except BaseException as exc:
            errors.append(exc)

    # Daemon threads: a hang fails the test below instead of blocking the interpreter.
    threads = [
        threading.Thread(target=target, args=job, daemon=True, name=f"loop-{i}")
        for i, job in enumerate(jobs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not [t.name for t in threads if t.is_alive()], "a thread's loop hung"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("other", ["same", "asyncio", "trio"])
def test_two_threads_writing_one_thread_id_get_seqs_1_to_n(
    anyio_backend: Any, other: str, tmp_path: Path
) -> None:
    backend, options = backend_of(anyio_backend)
    other_backend, other_options = (backend, options) if other == "same" else (other, {})
    cp = SqliteCheckpointer(tmp_path / "cp.db")
    # Both runs open their connection, then write at the same time.
    opened = threading.Barrier(2)

    def writer(who: str) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            await cp.read("t")
            await anyio.to_thread.run_sync(opened.wait, 10)
            for i in range(PUTS):
                if i % 2:
                    await cp.put("t", [write(i, who)])
                else:
                    await cp.put("t", [write(i, who), write(i, who)])
                await anyio.lowlevel.checkpoint()
            # Closing this run's connection leaves the other run's alone.
            await cp.aclose()

        return job

    run_in_threads([(backend, options, writer("a")), (other_backend, other_options, writer("b"))])

    async def read() -> list[tuple[int, str]]:
        async with cp:
            return [(r.seq, r.data["who"]) for r in await cp.read("t")]

    records = anyio.run(read, backend=backend, backend_options=options)
    total = 2 * (PUTS + PUTS // 2)
    assert [seq for seq, _ in records] == list(range(1, total + 1))
    assert sorted(who for _, who in records) == ["a"] * (total // 2) + ["b"] * (total // 2)


def test_two_threads_share_one_store(anyio_backend: Any, tmp_path: Path) -> None:
    backend, options = backend_of(anyio_backend)
    store = SqliteStore(tmp_path / "store.db")
    opened = threading.Barrier(2)

    def writer(who: str) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            await store.list(("ns",))
            await anyio.to_thread.run_sync(opened.wait, 10)
            for i in range(PUTS):
                await store.put(("ns",), f"{who}{i:03}", {"i": i})
                item = await store.get(("ns",), f"{who}{i:03}")
                assert item is not None
                assert item.value == {"i": i}

        return job

    run_in_threads([(backend, options, writer("a")), (backend, options, writer("b"))])

    async def keys() -> list[str]:
        async with store:
            return [item.key for item in await store.list(("ns",))]

    assert len(anyio.run(keys, backend=backend, backend_options=options)) == 2 * PUTS


def test_two_threads_creating_one_new_file_at_once_both_open_it(
    anyio_backend: Any, tmp_path: Path
) -> None:
    # Switching a new file to WAL from two connections at once can fail with
    # "database is locked" without waiting for the other (about one race in ten
    # here), so repeat on fresh files.
    backend, options = backend_of(anyio_backend)
    for attempt in range(40):
        file = tmp_path / f"cp{attempt}.db"
        cp = SqliteCheckpointer(file)
        both = threading.Barrier(2)

        def opener(who: str, cp: SqliteCheckpointer = cp, both: threading.Barrier = both) -> Any:
            async def job() -> None:
                await anyio.to_thread.run_sync(both.wait, 10)
                await cp.put("t", [write(0, who)])

            return job

        run_in_threads([(backend, options, opener("a")), ("asyncio", {}, opener("b"))])
        # Both writes landed, numbered 1 and 2, in one WAL database with one schema.
        with closing(sqlite3.connect(file)) as raw:
            rows = raw.execute(
                "SELECT seq, json_extract(data, '$.who') FROM checkpoint_records ORDER BY seq"
            ).fetchall()
            assert [seq for seq, _ in rows] == [1, 2]
            assert sorted(who for _, who in rows) == ["a", "b"]
            assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert raw.execute("SELECT key, value FROM meta ORDER BY key").fetchall() == [
                ("checkpoints", str(CHECKPOINT_SCHEMA_VERSION))
            ]


def worker_threads() -> int:
    """Threads alive besides the main one and any loop threads of this test."""
    return sum(1 for t in threading.enumerate() if t is not threading.main_thread())


def test_many_checkpointers_in_runs_use_a_bounded_number_of_threads(
    anyio_backend: Any, tmp_path: Path
) -> None:
    # 260 checkpointers used at once in one trio run left 91 worker threads
    # behind (one per connection closing at the run's end, each with a limiter
    # of its own). They share the run's default thread limiter now.
    backend, options = backend_of(anyio_backend)
    # On asyncio every open aiosqlite connection has a thread, by design, closed
    # and joined at the run's end: fewer checkpointers show that as well.
    cps = [
        SqliteCheckpointer(tmp_path / f"{i}.db") for i in range(260 if backend == "trio" else 60)
    ]
    bound = 40 + 2  # the default thread limiter's tokens, and a little slack
    before = worker_threads()
    most = 0

    async def use(cp: SqliteCheckpointer, run: int) -> None:
        nonlocal most
        await cp.put("t", [write(run, "x")])
        assert [r.step for r in await cp.read("t")] == list(range(run + 1))
        most = max(most, worker_threads() - before)

    async def main(run: int) -> None:
        async with anyio.create_task_group() as tg:
            for cp in cps:
                tg.start_soon(use, cp, run)

    for run in range(2):
        anyio.run(main, run, backend=backend, backend_options=options)
        # Idle worker threads may linger for reuse, but do not pile up.
        assert worker_threads() - before <= bound
    if backend == "trio":
        # aiosqlite keeps a thread per open connection on asyncio, by design.
        assert most <= bound

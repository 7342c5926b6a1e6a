"""Deleting a thread under its lease: fenced as a put is, and the lease stays held.

A holder that deletes its thread's records goes on holding the thread, and its
next puts number it from 1 again. A holder whose lease was lost (taken over
after it lapsed; in PostgreSQL, its lease connection dropped) deletes nothing
and gets ThreadLeaseLost.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest

from deepactors.errors import ThreadBusy, ThreadLeaseLost
from deepactors.persistence import CheckpointWrite, PostgresCheckpointer, SqliteCheckpointer

from .conftest import Clock


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


def lease_owners(file: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(file)) as raw:
        return raw.execute("SELECT thread_id, owner FROM thread_leases").fetchall()


def sql(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own (blocking: call in a thread)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description is not None else []


async def run_sql(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    return await anyio.to_thread.run_sync(sql, dsn, statement)


# Ends every session holding an advisory lock: the holders' lease connections drop.
_DROP_HOLDERS = (
    "SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted"
)


# --- SQLite ----------------------------------------------------------------------


async def test_sqlite_delete_under_the_lease_keeps_the_lease(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as a, SqliteCheckpointer(file, when_busy="raise") as b:
        async with a.lease("t") as lease:
            await a.put("t", [write(0), write(1)])
            await a.delete_thread("t")
            assert await a.read("t") == []
            # The lease row is still a's: nobody else may take the thread.
            rows = await anyio.to_thread.run_sync(lease_owners, file)
            assert rows == [("t", lease.owner)]
            with pytest.raises(ThreadBusy):
                async with b.lease("t"):
                    pytest.fail("took a held thread")
            await a.put("t", [write(2)])
            await a.put("t", [write(3), write(4)])
        records = await a.read("t")
    assert [(r.seq, r.step) for r in records] == [(1, 2), (2, 3), (3, 4)]


async def test_sqlite_delete_of_an_empty_thread_under_the_lease(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp, cp.lease("t"):
        await cp.delete_thread("t")
        await cp.put("t", [write(0)])
        assert [r.seq for r in await cp.read("t")] == [1]


async def test_sqlite_delete_by_a_holder_whose_lease_was_taken_over(
    tmp_path: Path, clock: Clock
) -> None:
    file = tmp_path / "cp.db"
    later = Clock(clock.now)
    a = SqliteCheckpointer(file, clock=clock, lease_ttl=1)
    b = SqliteCheckpointer(file, clock=later, when_busy="raise")
    async with a, b, a.lease("t"):
        await a.put("t", [write(0, who="a"), write(1, who="a")])
        later.now += 2  # a's lease lapsed (no renewal came): b takes the thread
        async with b.lease("t") as lease:
            assert lease.head == 2
            with pytest.raises(ThreadLeaseLost, match="taken over"):
                await a.delete_thread("t")
            # Nothing was deleted, and b's lease and numbering go on.
            await b.put("t", [write(2, who="b")])
        records = await b.read("t")
    assert [(r.seq, r.data["who"]) for r in records] == [(1, "a"), (2, "a"), (3, "b")]


async def test_sqlite_delete_without_the_lease_is_not_fenced(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as a, SqliteCheckpointer(file) as b:
        await b.put("t", [write(0)])
        async with a.lease("t"):
            await b.delete_thread("t")  # b holds nothing: deletes as it always did
            assert await a.read("t") == []
            await a.put("t", [write(1)])
        assert [r.seq for r in await a.read("t")] == [1]


# --- PostgreSQL ------------------------------------------------------------------


async def test_postgres_delete_under_the_lease_keeps_the_lease(postgres_dsn: str) -> None:
    async with (
        PostgresCheckpointer(postgres_dsn) as a,
        PostgresCheckpointer(postgres_dsn, when_busy="raise") as b,
    ):
        with anyio.fail_after(10):
            async with a.lease("t") as lease:
                await a.put("t", [write(0), write(1)])
                await a.delete_thread("t")
                assert await a.read("t") == []
                # The fence token stays on the thread's row, its numbering reset.
                rows = await run_sql(
                    postgres_dsn, "SELECT thread_id, owner, last_seq FROM checkpoint_threads"
                )
                assert rows == [("t", lease.owner, 0)]
                with pytest.raises(ThreadBusy):
                    async with b.lease("t"):
                        pytest.fail("took a held thread")
                await a.put("t", [write(2)])
                await a.put("t", [write(3), write(4)])
            records = await a.read("t")
    assert [(r.seq, r.step) for r in records] == [(1, 2), (2, 3), (3, 4)]


async def test_postgres_delete_of_an_unknown_thread_under_the_lease(postgres_dsn: str) -> None:
    async with PostgresCheckpointer(postgres_dsn) as cp:
        with anyio.fail_after(10):
            async with cp.lease("t"):
                await cp.delete_thread("t")
                await cp.put("t", [write(0)])
                assert [r.seq for r in await cp.read("t")] == [1]


async def test_postgres_delete_by_a_holder_whose_thread_was_taken_over(
    postgres_dsn: str,
) -> None:
    async with PostgresCheckpointer(postgres_dsn) as a, PostgresCheckpointer(postgres_dsn) as b:
        with anyio.fail_after(10):
            async with a.lease("t"):
                await a.put("t", [write(0, who="a")])
                await run_sql(postgres_dsn, _DROP_HOLDERS)
                async with b.lease("t") as lease:
                    assert lease.head == 1
                    with pytest.raises(ThreadLeaseLost, match="thread 't'"):
                        await a.delete_thread("t")
                    await b.put("t", [write(1, who="b")])
            records = await b.read("t")
    assert [(r.seq, r.data["who"]) for r in records] == [(1, "a"), (2, "b")]


async def test_postgres_delete_by_a_holder_whose_lease_connection_dropped(
    postgres_dsn: str,
) -> None:
    async with PostgresCheckpointer(postgres_dsn) as a, PostgresCheckpointer(postgres_dsn) as b:
        with anyio.fail_after(10):
            async with a.lease("t"):
                await a.put("t", [write(0), write(1)])
                await run_sql(postgres_dsn, _DROP_HOLDERS)  # nobody holds the thread now
                with pytest.raises(ThreadLeaseLost):
                    await a.delete_thread("t")
            assert [r.seq for r in await b.read("t")] == [1, 2]

"""The lease in the SQLite file: several checkpointer objects (and processes) on one file.

Two objects on one file stand for two processes here (they share nothing but the
file); real processes are in ``tests/crash``. Expiry is driven by hand-moved
clocks, as if the holder's event loop had stalled past the lease.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from contextlib import AsyncExitStack, closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, create_deep_agent
from deepactors.errors import CheckpointError, ThreadBusy, ThreadLeaseLost
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import CHECKPOINT_SCHEMA_VERSION, CheckpointWrite, SqliteCheckpointer
from tests.waiting import wait_until

from .conftest import Clock


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


def lease_rows(file: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(file)) as raw:
        return raw.execute(
            "SELECT thread_id, owner, pid, host, expires_at, next_owner FROM thread_leases"
        ).fetchall()


async def claimed(file: Path) -> None:
    """Return once a waiter has claimed the next turn of a held lease (it polled)."""

    # Polling: the waiter's state is in the file, with no event to wait on.
    async def next_turn_claimed() -> bool:
        return any(row[5] for row in await anyio.to_thread.run_sync(lease_rows, file))

    await wait_until(next_turn_claimed, what="the next turn claimed")


async def test_a_second_object_on_the_file_waits_for_the_first(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    log: list[str] = []
    async with SqliteCheckpointer(file) as a, SqliteCheckpointer(file) as b:

        async def second() -> None:
            async with b.lease("t") as lease:
                log.append(f"b in at head {lease.head}")

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg, a.lease("t"):
                tg.start_soon(second)
                await claimed(file)  # b has found the thread held and waits
                await a.put("t", [write(0)])
                log.append("a out")
    assert log == ["a out", "b in at head 1"]


async def test_a_busy_thread_names_its_holder(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as a, SqliteCheckpointer(file, when_busy="raise") as b:
        async with a.lease("t"):
            (row,) = await anyio.to_thread.run_sync(lease_rows, file)
            assert row[:1] == ("t",)
            assert (row[2], row[3]) == (os.getpid(), socket.gethostname())
            with pytest.raises(ThreadBusy) as info:
                async with b.lease("t"):
                    pytest.fail("took a held thread")
        assert f"pid {os.getpid()} on {socket.gethostname()}" in info.value.holder
        assert str(file) in str(info.value)
        # Given back: the row is gone, and b may take it.
        assert await anyio.to_thread.run_sync(lease_rows, file) == []
        async with b.lease("t"):
            pass


async def test_a_lapsed_lease_is_taken_over_and_its_holder_fenced(
    tmp_path: Path, clock: Clock
) -> None:
    file = tmp_path / "cp.db"
    later = Clock(clock.now)
    a = SqliteCheckpointer(file, clock=clock, lease_ttl=30)
    b = SqliteCheckpointer(file, clock=later, when_busy="raise")
    async with a, b, a.lease("t"):
        await a.put("t", [write(0)])
        with pytest.raises(ThreadBusy):
            async with b.lease("t"):
                pytest.fail("took a live lease")
        later.now += 31  # a's loop "stalled" past its lease: no renewal came
        async with b.lease("t") as lease:
            assert lease.head == 1
            with pytest.raises(ThreadLeaseLost, match="taken over"):
                await a.put("t", [write(1, who="a")])
            with pytest.raises(ThreadLeaseLost):
                await a.put("t", [write(1, who="a"), write(1, who="a")])
            await b.put("t", [write(1, who="b")])
        # a leaving later gives back nothing of b's.
    assert [r.data.get("who") for r in await b.read("t")] == [None, "b"]
    assert await anyio.to_thread.run_sync(lease_rows, file) == []


async def test_a_run_whose_lease_was_taken_over_fails_without_writing(
    tmp_path: Path, clock: Clock
) -> None:
    file = tmp_path / "cp.db"
    later = Clock(clock.now + 31)
    thief = SqliteCheckpointer(file, clock=later)
    async with AsyncExitStack() as stack:

        async def answer(request: ModelRequest) -> AssistantMessage:
            # While the model thinks, another process takes the lapsed lease.
            await stack.enter_async_context(thief.lease("t"))
            return AssistantMessage(content="too late")

        async with SqliteCheckpointer(file, clock=clock, lease_ttl=30) as saver:
            agent = create_deep_agent(FunctionModel(answer), checkpointer=saver)
            with pytest.raises(CheckpointError, match="taken over"):
                await agent.ainvoke("hi", thread_id="t")
        records = await thief.read("t")
    # The user's message was saved before the model call; the late answer was not.
    assert [m["role"] for r in records for m in r.data.get("messages", [])] == ["user"]


async def test_the_lease_is_renewed_while_held(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file, lease_ttl=0.3) as cp, cp.lease("t"):
        ((*_, first, _next),) = await anyio.to_thread.run_sync(lease_rows, file)

        async def renewed() -> bool:
            ((*_, expires, _next),) = await anyio.to_thread.run_sync(lease_rows, file)
            return bool(expires > first)

        await wait_until(renewed, what="the lease renewed", timeout=10, interval=0.05)


async def test_a_waiting_object_goes_before_a_holder_that_asks_again(tmp_path: Path) -> None:
    # Polling alone would let a holder that releases and asks again at once keep
    # the thread for ever; the first waiter's claim on the next turn prevents it.
    file = tmp_path / "cp.db"
    order: list[str] = []
    async with SqliteCheckpointer(file) as a, SqliteCheckpointer(file) as b:

        async def waiter() -> None:
            async with b.lease("t"):
                order.append("b")

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                async with a.lease("t"):
                    tg.start_soon(waiter)
                    await claimed(file)
                    order.append("a")
                async with a.lease("t"):
                    order.append("a again")
    assert order == ["a", "b", "a again"]


async def test_a_version_1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    file = tmp_path / "v1.db"
    with closing(sqlite3.connect(file, isolation_level=None)) as raw:
        raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        raw.execute("INSERT INTO meta VALUES ('checkpoints', '1')")
        raw.execute(
            "CREATE TABLE checkpoint_records (thread_id TEXT NOT NULL, seq INTEGER NOT NULL,"
            " path TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL,"
            " created_at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (thread_id, seq))"
        )
        raw.execute(
            "INSERT INTO checkpoint_records VALUES ('t', 1, 'main', 0, 'update', 1.0, '{\"a\":1}')"
        )
    async with SqliteCheckpointer(file) as cp:
        async with cp.lease("t") as lease:
            assert lease.head == 1
            await cp.put("t", [write(1)])
        assert [r.data for r in await cp.read("t")] == [{"a": 1}, {}]
    with closing(sqlite3.connect(file)) as raw:
        (version,) = raw.execute("SELECT value FROM meta WHERE key = 'checkpoints'").fetchone()
    assert version == str(CHECKPOINT_SCHEMA_VERSION) == "3"

"""What only the PostgreSQL checkpointer and store do: schema versions in the
migrations table, leases held by a connection, fenced writes, group commit.

The behaviour they share with the others is in the conformance suite
(``test_checkpointer.py``, ``test_leases.py``, ``test_store.py``...).
"""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import anyio.to_thread
import psycopg
import pytest

from deepactors.errors import (
    CheckpointError,
    CheckpointSchemaMismatch,
    CheckpointUnavailable,
    ConfigurationError,
    StoreCorrupt,
    ThreadBusy,
    ThreadLeaseLost,
)
from deepactors.persistence import (
    PG_CHECKPOINT_SCHEMA_VERSION,
    CheckpointWrite,
    PostgresCheckpointer,
    PostgresStore,
    open_checkpointer,
    open_store,
)
from tests.waiting import wait_until


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


def sql(dsn: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run one statement on a connection of its own (blocking: call in a thread)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description is not None else []


async def run_sql(
    dsn: str, statement: str, params: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    return await anyio.to_thread.run_sync(sql, dsn, statement, params)


async def test_a_database_of_a_newer_schema_is_refused_naming_both_versions(
    postgres_dsn: str,
) -> None:
    async with PostgresCheckpointer(postgres_dsn) as cp:
        await cp.put("t", [write(0)])
    newer = PG_CHECKPOINT_SCHEMA_VERSION + 1
    await run_sql(
        postgres_dsn,
        "INSERT INTO deepactors_migrations (component, version) VALUES ('checkpoints', %s)",
        (newer,),
    )
    async with PostgresCheckpointer(postgres_dsn) as cp:
        with pytest.raises(CheckpointSchemaMismatch) as info:
            await cp.read("t")
    text = str(info.value)
    assert cp.location in text
    assert f"version {newer} (written by a newer deepactors" in text
    assert f"reads and writes version {PG_CHECKPOINT_SCHEMA_VERSION}" in text
    # Nothing was changed: the rows are still there for the newer version.
    assert await run_sql(postgres_dsn, "SELECT count(*) FROM checkpoint_records") == [(1,)]


async def test_processes_starting_together_create_the_tables_once(postgres_dsn: str) -> None:
    cps = [PostgresCheckpointer(postgres_dsn) for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for i, cp in enumerate(cps):
            tg.start_soon(cp.put, f"t{i}", [write(0)])
    for cp in cps:
        await cp.aclose()
    rows = await run_sql(postgres_dsn, "SELECT component, version FROM deepactors_migrations")
    assert rows == [("checkpoints", PG_CHECKPOINT_SCHEMA_VERSION)]


async def test_a_store_of_a_newer_schema_is_refused(postgres_dsn: str) -> None:
    async with PostgresStore(postgres_dsn) as store:
        await store.put(("ns",), "k", {"v": 1})
    await run_sql(
        postgres_dsn, "INSERT INTO deepactors_migrations (component, version) VALUES ('store', 99)"
    )
    async with PostgresStore(postgres_dsn) as store:
        with pytest.raises(StoreCorrupt, match="store schema is version 99"):
            await store.get(("ns",), "k")


async def test_a_damaged_store_item_names_the_item_and_quotes_nothing(postgres_dsn: str) -> None:
    async with PostgresStore(postgres_dsn) as store:
        await store.put(("ns", "a"), "k", {"v": 1})
        await run_sql(postgres_dsn, "UPDATE store_items SET value = '{\"secret'")
        with pytest.raises(StoreCorrupt) as info:
            await store.list(("ns", "a"))
    assert "store item ('ns', 'a') 'k'" in str(info.value)
    assert "secret" not in str(info.value)


async def test_an_unreachable_database_is_a_checkpoint_error_naming_it(tmp_path: object) -> None:
    cp = PostgresCheckpointer(f"postgresql:///nowhere?host={tmp_path}&connect_timeout=2")
    with pytest.raises(CheckpointError) as info:
        await cp.read("t")
    assert cp.location in str(info.value)
    with pytest.raises(ConfigurationError):
        PostgresCheckpointer("host='unterminated")


async def test_a_busy_pool_is_waited_for_checkout_timeout_in_all(postgres_dsn: str) -> None:
    saver = PostgresCheckpointer(
        postgres_dsn, lease_connections=1, checkout_timeout=1.0, probe_after=0.2
    )
    async with saver, saver.lease("a"):  # the pool's one lease connection
        with anyio.fail_after(20), pytest.raises(CheckpointUnavailable) as caught:
            async with saver.lease("b"):
                pass
    message = str(caught.value)
    assert "no connection came free within 1 s (all 1 of the pool in use)" in message, message


@pytest.mark.parametrize("wait", ["checkout_timeout", "down_wait", "probe_after"])
@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf")])
def test_a_pool_wait_that_is_not_above_zero_is_refused_by_name(wait: str, seconds: float) -> None:
    dsn = "postgresql://localhost/db"
    with pytest.raises(ConfigurationError, match=wait):
        PostgresCheckpointer(dsn, **{wait: seconds})
    with pytest.raises(ConfigurationError, match=wait):
        PostgresStore(dsn, **{wait: seconds})


def test_open_checkpointer_picks_the_kind_by_the_target(
    postgres_dsn: str, tmp_path: object
) -> None:
    assert type(open_checkpointer(postgres_dsn)).__name__ == "PostgresCheckpointer"
    assert type(open_store(postgres_dsn)).__name__ == "PostgresStore"
    assert type(open_checkpointer(f"{tmp_path}/x.db")).__name__ == "SqliteCheckpointer"


def test_without_psycopg_the_classes_say_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from deepactors import *\n"  # works without psycopg
        "from deepactors.persistence import *\n"
        "import deepactors.persistence as p\n"
        "try:\n    p.PostgresCheckpointer\nexcept ImportError as e:\n    print(e)\n"
        "try:\n    from deepactors import PostgresStore\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.count("pip install 'deepactors[postgres]'") == 2


# --- leases across processes (two checkpointer objects stand for two processes) ------


_WAITERS = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
# Waits (up to 5 s) until the backend is gone, so its locks are released.
_DROP_HOLDERS = (
    "SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted"
)


async def lock_waiters_become(dsn: str, n: int) -> None:
    """Wait until ``n`` sessions wait in the server for an advisory lock."""

    # Polled: the server's lock queue has no event to wait on.
    async def queued() -> bool:
        return bool((await run_sql(dsn, _WAITERS))[0][0] == n)

    await wait_until(queued, what=f"{n} sessions waiting for the lock", timeout=5)


async def test_another_process_waits_in_the_servers_queue(postgres_dsn: str) -> None:
    order: list[str] = []
    async with PostgresCheckpointer(postgres_dsn) as a, PostgresCheckpointer(postgres_dsn) as b:

        async def second() -> None:
            async with b.lease("t") as lease:
                order.append(f"b in, head {lease.head}")

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg, a.lease("t"):
                tg.start_soon(second)
                await lock_waiters_become(postgres_dsn, 1)
                await a.put("t", [write(0)])
                order.append("a out")
    assert order == ["a out", "b in, head 1"]


async def test_a_process_told_not_to_wait_names_the_holder(postgres_dsn: str) -> None:
    async with (
        PostgresCheckpointer(postgres_dsn) as a,
        PostgresCheckpointer(postgres_dsn, when_busy="raise") as b,
    ):
        async with a.lease("t"):
            with pytest.raises(ThreadBusy) as info:
                async with b.lease("t"):
                    pytest.fail("took a held thread")
            async with b.lease("other"):
                pass
        async with b.lease("t"):
            pass
    assert info.value.thread_id == "t"
    assert f"deepactors pid {os.getpid()} on " in info.value.holder
    assert b.location in str(info.value)


async def test_a_waiter_cancelled_in_the_server_leaves_nothing_behind(postgres_dsn: str) -> None:
    async with (
        PostgresCheckpointer(postgres_dsn) as a,
        PostgresCheckpointer(postgres_dsn) as b,
        PostgresCheckpointer(postgres_dsn, when_busy="raise") as c,
    ):

        async def waiter() -> None:
            async with b.lease("t"):
                pytest.fail("took a held thread")

        with anyio.fail_after(10):
            async with a.lease("t"), anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                await lock_waiters_become(postgres_dsn, 1)
                tg.cancel_scope.cancel()
            await lock_waiters_become(postgres_dsn, 0)
            async with c.lease("t") as lease:  # free at once, for anybody
                assert lease.waited < 5
            async with b.lease("t"):  # and b's next turn works
                pass


async def test_a_holder_whose_lease_connection_dropped_writes_nothing(postgres_dsn: str) -> None:
    async with PostgresCheckpointer(postgres_dsn) as a, PostgresCheckpointer(postgres_dsn) as b:
        with anyio.fail_after(10):
            async with a.lease("t"):
                await a.put("t", [write(0)])
                await run_sql(postgres_dsn, _DROP_HOLDERS)
                with pytest.raises(ThreadLeaseLost) as info:
                    await a.put("t", [write(1)])
                assert "thread 't'" in str(info.value)
                async with b.lease("t") as lease:  # free at once
                    assert lease.head == 1
        assert [r.step for r in await b.read("t")] == [0]


async def test_a_holder_whose_thread_was_taken_over_writes_nothing(postgres_dsn: str) -> None:
    async with PostgresCheckpointer(postgres_dsn) as a, PostgresCheckpointer(postgres_dsn) as b:
        with anyio.fail_after(10):
            async with a.lease("t"):
                await run_sql(postgres_dsn, _DROP_HOLDERS)
                async with b.lease("t"):
                    await b.put("t", [write(0, who="b")])
                    with pytest.raises(ThreadLeaseLost):
                        await a.put("t", [write(1, who="a"), write(2, who="a")])
                    await b.put("t", [write(1, who="b")])
        assert [r.data["who"] for r in await b.read("t")] == ["b", "b"]


async def test_puts_made_together_share_commits(postgres_dsn: str) -> None:
    async with PostgresCheckpointer(postgres_dsn) as cp:
        await cp.put("warm", [write(0)])  # the pool is open
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(cp.put, f"t{i}", [write(0, i=i), write(1, i=i)])
        threads = await cp.threads()
    assert [t.records for t in threads if t.thread_id != "warm"] == [2] * 20
    (commits,) = await run_sql(
        postgres_dsn,
        "SELECT count(DISTINCT xmin::text) FROM checkpoint_records WHERE thread_id <> 'warm'",
    )
    assert commits[0] < 20  # type: ignore[operator]


async def test_a_put_cancelled_mid_commit_lands_whole_or_not_at_all(postgres_dsn: str) -> None:
    async with PostgresCheckpointer(postgres_dsn) as cp:
        await cp.put("warm", [write(0)])  # the pool and the writer are open
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(cp.put, "t", [write(0, i=0), write(0, i=1), write(0, i=2)])
                await anyio.wait_all_tasks_blocked()  # the put waits on the server
                tg.cancel_scope.cancel()
        records = await cp.read("t")
        assert [r.data["i"] for r in records] in ([], [0, 1, 2])
        await cp.put("t", [write(1, i=3)])  # and the thread goes on, numbered on
        assert [r.seq for r in await cp.read("t")] == list(range(1, len(records) + 2))

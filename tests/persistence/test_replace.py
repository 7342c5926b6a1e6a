"""``Rewritable.replace``: a thread's records swapped whole, in one transaction, fenced.

What ``ThreadHandle.keep_latest`` stores its compaction with, on every kind of
checkpointer (memory, SQLite, PostgreSQL): the new records are ``seq`` 1..n,
the thread's origin moves (a reader that remembered it sees news), other
threads are untouched, a holder whose lease was lost changes nothing, and a
bad record refuses the whole swap.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deepactors import create_deep_agent, open_runtime
from deepactors.errors import ThreadLeaseLost
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import (
    Checkpointer,
    CheckpointWrite,
    PostgresCheckpointer,
    Rewritable,
    SqliteCheckpointer,
)

from .conftest import Clock

pytestmark = pytest.mark.anyio


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


async def test_replace_swaps_the_records_and_moves_the_origin(
    checkpointer: Checkpointer, clock: Clock
) -> None:
    assert isinstance(checkpointer, Rewritable)
    await checkpointer.put("t", [write(0, n=0), write(1, n=1), write(2, n=2)])
    await checkpointer.put("other", [write(0, n=9)])
    async with checkpointer.lease("t") as lease:
        origin = lease.origin
        await checkpointer.replace("t", [write(2, n=3), write(2, n=4)])
    records = await checkpointer.read("t")
    assert [(r.seq, r.step, r.data) for r in records] == [(1, 2, {"n": 3}), (2, 2, {"n": 4})]
    async with checkpointer.lease("t") as lease:
        assert lease.head == 2
        assert lease.origin is not None
        assert origin is not None
        assert lease.origin >= origin
        await checkpointer.put("t", [write(3, n=5)])
    assert [r.seq for r in await checkpointer.read("t")] == [1, 2, 3]
    assert [r.data for r in await checkpointer.read("other")] == [{"n": 9}]


async def test_a_bad_record_refuses_the_whole_swap(checkpointer: Checkpointer) -> None:
    assert isinstance(checkpointer, Rewritable)
    await checkpointer.put("t", [write(0, n=0), write(1, n=1)])
    bad = CheckpointWrite(path="main", step=3, kind="update", data={"n": {1: "not a str key"}})
    with pytest.raises(TypeError, match="key"):
        await checkpointer.replace("t", [write(2, n=2), bad])
    assert [r.data for r in await checkpointer.read("t")] == [{"n": 0}, {"n": 1}]


async def test_sqlite_replace_by_a_holder_whose_lease_was_taken_over(
    tmp_path: Path, clock: Clock
) -> None:
    file = tmp_path / "cp.db"
    later = Clock(clock.now)
    a = SqliteCheckpointer(file, clock=clock, lease_ttl=1)
    b = SqliteCheckpointer(file, clock=later, when_busy="raise")
    async with a, b, a.lease("t"):
        await a.put("t", [write(0, who="a"), write(1, who="a")])
        later.now += 2  # a's lease lapsed: b takes the thread
        async with b.lease("t"):
            with pytest.raises(ThreadLeaseLost, match="taken over"):
                await a.replace("t", [write(1, who="compacted")])
            await b.put("t", [write(2, who="b")])
        records = await b.read("t")
    assert [(r.seq, r.data["who"]) for r in records] == [(1, "a"), (2, "a"), (3, "b")]


async def test_postgres_replace_by_a_holder_whose_lease_connection_dropped(
    postgres_dsn: str,
) -> None:
    from .test_fenced_delete import _DROP_HOLDERS, run_sql

    async with PostgresCheckpointer(postgres_dsn) as a:
        with anyio.fail_after(10):
            async with a.lease("replace-fenced"):
                await a.put("replace-fenced", [write(0), write(1)])
                await run_sql(postgres_dsn, _DROP_HOLDERS)
                with pytest.raises(ThreadLeaseLost):
                    await a.replace("replace-fenced", [write(1)])
            assert [r.seq for r in await a.read("replace-fenced")] == [1, 2]


def chat(request: ModelRequest) -> str:
    return f"re: {request.messages[-1].text}"


async def test_keep_latest_on_postgres(postgres_dsn: str) -> None:
    async with PostgresCheckpointer(postgres_dsn) as saver:
        agent = create_deep_agent(FunctionModel(chat), checkpointer=saver)
        async with open_runtime() as rt:
            thread = rt.thread(agent, "keep-latest")
            for text in ("one", "two", "three"):
                await thread.ainvoke(text)
            before = await thread.state()
            assert await thread.keep_latest() > 0
            assert [r.kind for r in await saver.read("keep-latest")] == ["update"]
            assert (await thread.state()).values == before.values
            result = await thread.ainvoke("four")
            assert [m.text for m in result["messages"]][-2:] == ["four", "re: four"]
            assert len(result["messages"]) == 8

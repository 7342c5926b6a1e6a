"""One conformance suite for every checkpointer: memory and SQLite, on asyncio and trio."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import anyio
import pytest

from deepactors.persistence import Checkpointer, CheckpointWrite

from .conftest import Clock


def write(
    step: int, *, path: str = "main", kind: str = "messages", **data: object
) -> CheckpointWrite:
    return CheckpointWrite(path=path, step=step, kind=kind, data=dict(data))


async def test_round_trip_keeps_every_field(checkpointer: Checkpointer) -> None:
    data = {
        "messages": [{"role": "assistant", "content": "héllo ✓", "tool_calls": []}],
        "n": 1.5,
        "none": None,
        "nested": {"a": [True, False]},
    }
    before = time.time()
    await checkpointer.put(
        "t1", [CheckpointWrite(path="main/task-1:r", step=3, kind="k", data=data)]
    )
    (record,) = await checkpointer.read("t1")
    assert record.thread_id == "t1"
    assert record.seq == 1
    assert (record.path, record.step, record.kind) == ("main/task-1:r", 3, "k")
    assert record.data == data
    assert before - 1 <= record.created_at <= time.time() + 1


async def test_seq_counts_up_per_thread_in_put_order(checkpointer: Checkpointer) -> None:
    await checkpointer.put("a", [write(0, i=0), write(0, i=1)])
    await checkpointer.put("b", [write(0, i=0)])
    await checkpointer.put("a", [write(1, i=2)])
    records = await checkpointer.read("a")
    assert [r.seq for r in records] == [1, 2, 3]
    assert [r.data["i"] for r in records] == [0, 1, 2]
    assert [r.seq for r in await checkpointer.read("b")] == [1]
    # One batch shares one timestamp.
    assert records[0].created_at == records[1].created_at


async def test_read_filters_by_path_and_upto_seq(checkpointer: Checkpointer) -> None:
    await checkpointer.put("t", [write(0, path="main"), write(0, path="main/task-1:r")])
    await checkpointer.put("t", [write(1, path="main"), write(1, path="main/task-1:r")])
    assert [r.seq for r in await checkpointer.read("t", path="main")] == [1, 3]
    assert [r.seq for r in await checkpointer.read("t", upto_seq=2)] == [1, 2]
    assert [r.seq for r in await checkpointer.read("t", path="main/task-1:r", upto_seq=3)] == [2]
    assert await checkpointer.read("t", upto_seq=0) == []
    assert await checkpointer.read("t", path="nobody") == []
    assert await checkpointer.read("unknown") == []


async def test_stored_data_is_a_copy(checkpointer: Checkpointer) -> None:
    data: dict[str, object] = {"files": {"/a": ["x"]}}
    await checkpointer.put("t", [CheckpointWrite(path="main", step=0, kind="files", data=data)])
    data["files"] = "changed"
    (first,) = await checkpointer.read("t")
    first.data["files"]["/a"].append("y")
    (second,) = await checkpointer.read("t")
    assert second.data == {"files": {"/a": ["x"]}}


async def test_a_batch_with_a_bad_record_stores_nothing(checkpointer: Checkpointer) -> None:
    await checkpointer.put("t", [write(0)])
    with pytest.raises(TypeError):
        await checkpointer.put("t", [write(1), write(2, bad=object())])
    with pytest.raises(TypeError):
        await checkpointer.put("t", [CheckpointWrite(path="main", step=3, kind="k", data=[1])])  # type: ignore[arg-type]
    await checkpointer.put("t", [write(4)])
    assert [(r.seq, r.step) for r in await checkpointer.read("t")] == [(1, 0), (2, 4)]


async def test_an_empty_batch_changes_nothing(checkpointer: Checkpointer) -> None:
    await checkpointer.put("t", [])
    assert await checkpointer.threads() == []
    assert await checkpointer.read("t") == []


async def test_thread_id_must_be_a_non_empty_string(checkpointer: Checkpointer) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        await checkpointer.put("", [write(0)])


async def test_concurrent_puts_keep_each_batch_contiguous(checkpointer: Checkpointer) -> None:
    async def writer(task: int) -> None:
        for batch in range(5):
            await checkpointer.put(
                "shared", [write(batch, task=task, batch=batch, i=i) for i in range(3)]
            )

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for task in range(20):
                tg.start_soon(writer, task)
    records = await checkpointer.read("shared")
    assert [r.seq for r in records] == list(range(1, 20 * 5 * 3 + 1))
    for start in range(0, len(records), 3):
        chunk = records[start : start + 3]
        assert {(r.data["task"], r.data["batch"]) for r in chunk} == {
            (chunk[0].data["task"], chunk[0].data["batch"])
        }
        assert [r.data["i"] for r in chunk] == [0, 1, 2]
    for task in range(20):
        batches = [r.data["batch"] for r in records if r.data["task"] == task]
        assert batches == sorted(batches)


async def test_threads_lists_counts_and_newest_record(checkpointer: Checkpointer) -> None:
    await checkpointer.put("b", [write(0), write(0)])
    await checkpointer.put("a", [write(0)])
    await checkpointer.put("b", [write(1)])
    infos = await checkpointer.threads()
    assert [(i.thread_id, i.records, i.last_seq) for i in infos] == [("a", 1, 1), ("b", 3, 3)]
    last_b = (await checkpointer.read("b"))[-1]
    assert infos[1].updated_at == last_b.created_at


async def test_delete_thread_removes_only_that_thread(checkpointer: Checkpointer) -> None:
    await checkpointer.put("a", [write(0)])
    await checkpointer.put("b", [write(0)])
    await checkpointer.delete_thread("a")
    await checkpointer.delete_thread("never-existed")
    assert await checkpointer.read("a") == []
    assert [i.thread_id for i in await checkpointer.threads()] == ["b"]
    # A deleted thread starts over.
    await checkpointer.put("a", [write(5)])
    assert [r.seq for r in await checkpointer.read("a")] == [1]


async def test_aclose_is_idempotent_and_not_final(checkpointer: Checkpointer) -> None:
    await checkpointer.put("t", [write(0)])
    await checkpointer.aclose()
    await checkpointer.aclose()
    assert [r.seq for r in await checkpointer.read("t")] == [1]


async def test_works_through_the_protocol_alone(checkpointer: Checkpointer) -> None:
    # What the runtime does with any checkpointer, knowing only the protocol.
    assert isinstance(checkpointer, Checkpointer)
    async with checkpointer as cp:
        assert cp is checkpointer
        async with cp.lease("t") as lease:
            assert (lease.thread_id, lease.head) == ("t", 0)
            await cp.put("t", [write(0), write(0)])
        assert [r.seq for r in await cp.read("t")] == [1, 2]
        assert [(i.thread_id, i.records) for i in await cp.threads()] == [("t", 2)]
        assert cp.location
    # Leaving the block closed it, but not for good.
    async with checkpointer.lease("t") as lease:
        assert lease.head == 2
    assert [r.seq for r in await checkpointer.read("t")] == [1, 2]


async def test_created_at_comes_from_the_clock(
    make_checkpointer: Callable[..., Checkpointer], clock: Clock
) -> None:
    async with make_checkpointer(clock=clock) as cp:
        await cp.put("t", [write(0), write(0)])
        clock.now += 5
        await cp.put("t", [write(1)])
        assert [r.created_at for r in await cp.read("t")] == [clock.now - 5] * 2 + [clock.now]
        assert [i.updated_at for i in await cp.threads()] == [clock.now]


async def test_a_thread_id_that_is_not_a_string_is_a_type_error(
    checkpointer: Checkpointer,
) -> None:
    for call in (
        lambda: checkpointer.put(123, [write(0)]),  # type: ignore[arg-type]
        lambda: checkpointer.read(123),  # type: ignore[arg-type]
        lambda: checkpointer.delete_thread(123),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match="thread_id"):
            await call()
    with pytest.raises(TypeError, match="thread_id"):
        async with checkpointer.lease(123):  # type: ignore[arg-type]
            pass
    assert await checkpointer.threads() == []


# A lone surrogate, as json.loads('"\\udcff"') or os.fsdecode(b"\xff") produce.
LONE = json.loads('"bad \\udcff byte"')


async def test_lone_surrogates_round_trip(checkpointer: Checkpointer) -> None:
    data = {"text": LONE, LONE: [LONE, {"high": "\ud800 alone"}], "ok": "héllo ✓ 😀"}
    await checkpointer.put("t", [CheckpointWrite(path="main", step=0, kind="k", data=data)])
    (record,) = await checkpointer.read("t")
    assert record.data == data


async def test_a_surrogate_pair_split_in_two_is_refused(checkpointer: Checkpointer) -> None:
    # JSON would read "\ud83d\ude00" back as one character, 😀: not the same string.
    split = "\ud83d\ude00"
    with pytest.raises(ValueError, match="surrogate pair"):
        await checkpointer.put("t", [write(0), write(1, text=split)])
    assert await checkpointer.read("t") == []


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({1: "x", "1": "y"}, "int key 1 at the top level"),
        ({"a": [{"b": {None: 1}}]}, "NoneType key None at ['a'][0]['b']"),
        ({"a": {True: 1}}, "bool key True at ['a']"),
        ({"a": ({2.5: 1},)}, "float key 2.5 at ['a'][0]"),
    ],
)
async def test_a_key_that_is_not_a_string_is_refused_naming_where(
    checkpointer: Checkpointer, data: dict[str, object], where: str
) -> None:
    # json.dumps would turn it into a string: {1: "x", "1": "y"} would lose a value.
    with pytest.raises(TypeError, match=re.escape(where)):
        await checkpointer.put(
            "t", [write(0), CheckpointWrite(path="m", step=1, kind="k", data=data)]
        )
    assert await checkpointer.read("t") == []


@pytest.mark.parametrize("bad", ["thread_id", "path", "kind"])
async def test_an_identifier_with_a_lone_surrogate_is_a_value_error(
    checkpointer: Checkpointer, bad: str
) -> None:
    fields = {"thread_id": "t", "path": "main", "kind": "k"} | {bad: LONE}
    record = CheckpointWrite(path=fields["path"], step=0, kind=fields["kind"], data={})
    with pytest.raises(ValueError, match="lone surrogate"):
        await checkpointer.put(fields["thread_id"], [record])
    if bad == "thread_id":
        with pytest.raises(ValueError, match="lone surrogate"):
            await checkpointer.read(LONE)
    assert await checkpointer.threads() == []

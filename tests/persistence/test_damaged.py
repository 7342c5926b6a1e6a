"""Damaged checkpoints: reading them is an error that names the place, never silent loss.

Every error names the file (or place), the thread and the record, and quotes
none of the stored data (it may hold a user's secrets). The record-level tests
run over every durable kind (see ``conftest.Kind``); the journal-level ones
(unknown kinds, unreadable updates) over every kind.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from deepactors import create_deep_agent
from deepactors.errors import CheckpointCorrupt, PersistenceError, StoreCorrupt
from deepactors.models import FunctionModel
from deepactors.persistence import (
    Checkpointer,
    CheckpointRecord,
    CheckpointWrite,
    MemoryCheckpointer,
    SqliteCheckpointer,
    SqliteStore,
)
from deepactors.persistence.sqlite._conn import BUSY_TIMEOUT

from .conftest import Durable

SECRET = "s3cr3t-of-the-user"


def write(step: int, kind: str = "update", **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind=kind, data=dict(data))


def message(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_a_missing_record_is_corrupt_not_a_shorter_history(durable: Durable) -> None:
    cp = durable.checkpointer
    await cp.put("t", [write(0, **message("one")), write(0, **message("two"))])
    await cp.put("t", [write(1, **message("three"))])
    await durable.delete_record("t", 2)
    for read in (cp.read("t"), cp.read("t", path="main"), cp.read("t", upto_seq=3)):
        with pytest.raises(CheckpointCorrupt) as info:
            await read
        text = str(info.value)
        assert cp.location in text
        assert "thread 't'" in text
        assert "seq 2 is missing" in text
    # The intact prefix is still readable, and so is the list of threads.
    assert [r.seq for r in await cp.read("t", upto_seq=1)] == [1]
    assert [i.records for i in await cp.threads()] == [2]


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("data", b"\xff\xfe" + SECRET.encode() + b"\x80", "its data is not valid UTF-8"),
        ("data", '{"messages": "' + SECRET, "its data is not a JSON object"),
        ("data", '["' + SECRET + '"]', "its data is not a JSON object"),
        ("data", "[" * 100_000 + "]" * 100_000, "its data is nested too deeply"),
        ("kind", b"\xff" + SECRET.encode(), "its kind is not valid UTF-8"),
        ("path", b"\xc3", "its path is not valid UTF-8"),  # a cut multi-byte character
        ("step", SECRET, "its step is not an integer"),
        ("created_at", SECRET, "its time is not a number"),
    ],
)
async def test_a_damaged_field_names_the_record_and_quotes_nothing(
    durable: Durable, field: str, value: object, what: str
) -> None:
    cp = durable.checkpointer
    await cp.put("t", [write(0, **message("fine")), write(0, **message("fine too"))])
    await durable.set_field("t", 2, field, value)
    with pytest.raises(CheckpointCorrupt) as info:
        await cp.read("t")
    text = str(info.value)
    assert f"{cp.location}: thread 't', record seq 2: {what}" in text
    assert SECRET not in text
    assert info.value.__cause__ is None  # nothing quoting the data hangs off it


async def test_a_seq_that_is_not_a_number_is_corrupt(durable: Durable) -> None:
    cp = durable.checkpointer
    await cp.put("t", [write(0), write(0)])
    await durable.set_field("t", 2, "seq", "two")
    with pytest.raises(CheckpointCorrupt, match="seq is not an integer"):
        await cp.read("t")
    with pytest.raises(CheckpointCorrupt, match="seq is not an integer"):
        await cp.threads()


# --- what the journal reads (every kind) ---------------------------------------------


async def test_an_unknown_kind_stops_the_resume(checkpointer: Checkpointer) -> None:
    # It used to be skipped: the thread resumed on a history without it.
    await checkpointer.put("t", [write(0, **message("one")), write(0, kind="mystery", note=SECRET)])
    agent = create_deep_agent(FunctionModel(lambda r: "answer"), checkpointer=checkpointer)
    with pytest.raises(CheckpointCorrupt) as info:
        await agent.ainvoke("two", thread_id="t")
    text = str(info.value)
    assert f"{checkpointer.location}: thread 't', actor 'main', record seq 2" in text
    assert "unknown kind 'mystery'" in text
    assert SECRET not in text
    with pytest.raises(CheckpointCorrupt) as info:
        await agent.aget_state("t")
    assert f"{checkpointer.location}: thread 't', actor 'main', record seq 2" in str(info.value)
    assert len(await checkpointer.read("t")) == 2  # nothing was added


class LossyCheckpointer(MemoryCheckpointer):
    """A checkpointer that loses the second record when reading (a broken third party)."""

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        records = await super().read(thread_id, path=path, upto_seq=upto_seq)
        return [r for r in records if r.seq != 2]


async def test_a_gap_stops_the_resume_whatever_the_checkpointer_returns() -> None:
    # It used to resume without the lost message.
    saver = LossyCheckpointer()
    await saver.put("t", [write(0, **message(str(i))) for i in range(3)])
    agent = create_deep_agent(FunctionModel(lambda r: "answer"), checkpointer=saver)
    with pytest.raises(CheckpointCorrupt, match="memory: thread 't': record seq 2 is missing"):
        await agent.ainvoke("more", thread_id="t")


async def test_an_unreadable_update_names_the_channel_not_the_content(
    checkpointer: Checkpointer,
) -> None:
    await checkpointer.put(
        "t", [write(0, messages=[{"role": "robot", "content": SECRET}], todos=[])]
    )
    agent = create_deep_agent(FunctionModel(lambda r: "answer"), checkpointer=checkpointer)
    with pytest.raises(CheckpointCorrupt) as info:
        await agent.ainvoke("hi", thread_id="t")
    text = str(info.value)
    assert "thread 't', actor 'main', record seq 1: unreadable update of channel 'messages'" in text
    assert SECRET not in text
    assert info.value.__cause__ is None


async def test_an_unreadable_tool_result_quotes_nothing(checkpointer: Checkpointer) -> None:
    await checkpointer.put(
        "t",
        [
            write(0, **message("go")),
            write(1, kind="tool_result", message={"role": "tool", "content": SECRET}),
        ],
    )
    agent = create_deep_agent(FunctionModel(lambda r: "answer"), checkpointer=checkpointer)
    with pytest.raises(CheckpointCorrupt) as info:
        await agent.ainvoke("hi", thread_id="t")
    assert "record seq 2: unreadable tool result" in str(info.value)
    assert SECRET not in str(info.value)


# --- damaged files ------------------------------------------------------------------


def truncate(file: Path, size: int) -> None:
    with file.open("r+b") as f:
        f.truncate(size)


async def test_a_file_truncated_under_an_open_connection_is_corrupt_not_locked(
    tmp_path: Path,
) -> None:
    # Emptied while a connection still has the database open (its write-ahead
    # log intact): a new connection found it "locked" for the whole busy timeout.
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as first:
        await first.put("t", [write(0, **message("one"))])
        await anyio.to_thread.run_sync(truncate, file, 0)
        # Found at once: a wait for the "lock" would outlast this guard (BUSY_TIMEOUT).
        with anyio.fail_after(BUSY_TIMEOUT / 2):
            async with SqliteCheckpointer(file) as second:
                with pytest.raises(CheckpointCorrupt, match="truncated") as info:
                    await second.read("t")
        assert str(file) in str(info.value)
        assert "locked" not in str(info.value)


async def test_a_file_cut_mid_page_is_corrupt(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(i, **message("x" * 3000)) for i in range(200)])
    size = file.stat().st_size
    assert size > 100_000  # checkpointed into the file on close
    await anyio.to_thread.run_sync(truncate, file, size // 2 + 123)
    async with SqliteCheckpointer(file) as cp:
        with pytest.raises(CheckpointCorrupt, match=str(file)):
            await cp.read("t")


async def test_a_damaged_store_item_names_the_item_and_quotes_nothing(tmp_path: Path) -> None:
    file = tmp_path / "store.db"
    async with SqliteStore(file) as store:
        await store.put(("memories", "alice"), "prefs", {"tea": True})
        await store.aclose()

        def damage() -> None:
            with closing(sqlite3.connect(file, isolation_level=None)) as raw:
                raw.execute("UPDATE store_items SET value = ?", (b"\xff" + SECRET.encode(),))

        await anyio.to_thread.run_sync(damage)
        for read in (
            store.get(("memories", "alice"), "prefs"),
            store.list(("memories", "alice")),
            store.search(("memories",)),
        ):
            with pytest.raises(StoreCorrupt) as info:
                await read
            text = str(info.value)
            assert 'store item ["memories","alice"] \'prefs\'' in text
            assert "not valid UTF-8" in text
            assert SECRET not in text


def _schema_span(data: bytes, page_size: int) -> range:
    """Where the schema's SQL text lies in page 1 (SQLite keeps it there, in sqlite_schema)."""
    page = data[:page_size]
    start = page.find(b"CREATE TABLE")
    assert start > 0, "no schema text in page 1"
    return range(start, page.rfind(b")") + 1)


@pytest.mark.parametrize("kind", ["checkpointer", "store"])
async def test_bytes_overwritten_in_the_header_page_are_an_error_of_ours(
    tmp_path: Path, kind: str
) -> None:
    # A 0xff in the schema's text: SQLite reports a malformed schema quoting that
    # text, which the sqlite3 module failed to decode (a bare UnicodeDecodeError).
    reference = tmp_path / "reference.db"
    if kind == "checkpointer":
        async with SqliteCheckpointer(reference) as cp:
            await cp.put("t", [write(0, **message("one")), write(1, **message("two"))])
    else:
        async with SqliteStore(reference) as store:
            await store.put(("memories",), "k", {"tea": True})
    data = await anyio.Path(reference).read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    span = _schema_span(data, page_size)
    outcomes: dict[str, int] = {}
    for at in span[::23]:
        file = tmp_path / f"damaged-{at}.db"
        await anyio.Path(file).write_bytes(data[:at] + b"\xff" + data[at + 1 :])
        error = await _read_damaged(kind, file)
        if error is None:
            outcome = "read"
        else:
            assert str(file) in str(error)
            outcome = type(error).__name__ + (": not UTF-8" if "not UTF-8" in str(error) else "")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # Every overwrite is read, or refused by an error of ours naming the file
    # (anything else has left the loop above); the UTF-8 case is among them.
    assert any(o.endswith("not UTF-8") for o in outcomes), outcomes


async def _read_damaged(kind: str, file: Path) -> PersistenceError | None:
    """Open ``file`` and read what was written; the error of ours that stopped it, if any."""
    try:
        if kind == "checkpointer":
            async with SqliteCheckpointer(file) as cp:
                await cp.read("t")
                await cp.threads()
        else:
            async with SqliteStore(file) as store:
                await store.get(("memories",), "k")
    except PersistenceError as exc:
        return exc
    return None

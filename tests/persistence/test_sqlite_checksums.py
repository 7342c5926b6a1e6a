"""A checksum per SQLite checkpoint record: a changed record is corrupt, never read as written.

SQLite checks its pages' structure, not what they hold: a byte changed in a
record's data used to come back as a valid, different value. Every record now
carries a CRC32 of its fields (``seq`` and the thread included), checked on
read; files from before (schema version 2) open, their old records unchecked.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import anyio.to_thread
import pytest

from deepactors.errors import CheckpointCorrupt
from deepactors.persistence import CHECKPOINT_SCHEMA_VERSION, CheckpointWrite, SqliteCheckpointer

SECRET = "s3cr3t-of-the-user"


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


def execute(file: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(file, isolation_level=None)) as raw:
        return raw.execute(sql, params).fetchall()


async def tamper(cp: SqliteCheckpointer, sql: str, params: tuple[object, ...] = ()) -> None:
    await cp.aclose()  # from outside, between connections
    await anyio.to_thread.run_sync(execute, Path(cp.path), sql, params)


# One record, a few (one statement), many (a transaction); a thread's first put
# (a transaction, reading its last seq) or a later one (the seq known, one
# statement): each way of writing is checked, leased or not.
@pytest.mark.parametrize("count", [1, 3, 40])
@pytest.mark.parametrize("leased", [False, True], ids=["free", "leased"])
@pytest.mark.parametrize("before", [0, 2], ids=["first", "later"])
async def test_valid_json_written_behind_our_back_is_corrupt(
    tmp_path: Path, count: int, leased: bool, before: int
) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("other", [write(0, n=0)])
        records = [write(0, n=i) for i in range(before, before + count)]
        if before:
            await cp.put("t", [write(0, n=i) for i in range(before)])
        if leased:
            async with cp.lease("t"):
                await cp.put("t", records)
        else:
            await cp.put("t", records)
        assert [r.data for r in await cp.read("t")] == [{"n": i} for i in range(before + count)]
        last = before + count
        await tamper(
            cp,
            "UPDATE checkpoint_records SET data = ? WHERE thread_id = 't' AND seq = ?",
            (f'{{"n":"{SECRET}"}}', last),
        )
        for read in (cp.read("t"), cp.read("t", path="main"), cp.read("t", upto_seq=last)):
            with pytest.raises(CheckpointCorrupt) as info:
                await read
            text = str(info.value)
            assert f"{cp.path}: thread 't', record seq {last}: its checksum does not match" in text
            assert SECRET not in text
        assert [r.data for r in await cp.read("other")] == [{"n": 0}]


@pytest.mark.parametrize(
    ("column", "value"),
    [("seq", 9), ("step", 7), ("kind", "messages"), ("path", "main/child"), ("created_at", 5.0)],
)
async def test_every_field_is_covered(tmp_path: Path, column: str, value: object) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("t", [write(0, n=1)])
        await tamper(cp, f"UPDATE checkpoint_records SET {column} = ?", (value,))
        # Read by path: the seq sequence, checked after the records, is not what fails.
        seq = value if column == "seq" else 1
        with pytest.raises(CheckpointCorrupt, match=rf"seq {seq}: its checksum does not match"):
            await cp.read("t", path=str(value) if column == "path" else "main")


async def test_a_record_moved_to_another_thread_is_corrupt(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("a", [write(0, who="a")])
        await tamper(cp, "UPDATE checkpoint_records SET thread_id = 'b'")
        with pytest.raises(CheckpointCorrupt, match="thread 'b', record seq 1: its checksum"):
            await cp.read("b")


async def test_a_lost_checksum_is_corrupt(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("t", [write(0, n=1)])
        await tamper(cp, "UPDATE checkpoint_records SET crc = NULL")
        with pytest.raises(CheckpointCorrupt, match="record seq 1: its checksum is missing"):
            await cp.read("t")


async def test_an_integer_clock_reads_back(tmp_path: Path) -> None:
    # The REAL column gives an integer time back as a float: same checksum.
    async with SqliteCheckpointer(tmp_path / "cp.db", clock=lambda: 1_000_000) as cp:
        await cp.put("t", [write(0, n=1)])
        await cp.put("t", [write(1, n=2), write(1, n=3)])
        assert [r.created_at for r in await cp.read("t")] == [1_000_000.0] * 3


def make_version_2_file(file: Path) -> None:
    with closing(sqlite3.connect(file, isolation_level=None)) as raw:
        raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        raw.execute("INSERT INTO meta VALUES ('checkpoints', '2')")
        raw.execute(
            "CREATE TABLE checkpoint_records (thread_id TEXT NOT NULL, seq INTEGER NOT NULL,"
            " path TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL,"
            " created_at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (thread_id, seq))"
        )
        raw.execute(
            "CREATE TABLE thread_leases (thread_id TEXT PRIMARY KEY, owner TEXT,"
            " pid INTEGER, host TEXT, machine TEXT, started INTEGER, taken_at REAL,"
            " expires_at REAL, next_owner TEXT, next_until REAL)"
        )
        for seq in (1, 2):
            raw.execute(
                "INSERT INTO checkpoint_records VALUES ('t', ?, 'main', 0, 'update', 1.0, ?)",
                (seq, f'{{"old":{seq}}}'),
            )


async def test_a_version_2_file_opens_its_old_records_unchecked(tmp_path: Path) -> None:
    file = tmp_path / "v2.db"
    await anyio.to_thread.run_sync(make_version_2_file, file)
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(1, new=3)])
        assert [r.data for r in await cp.read("t")] == [{"old": 1}, {"old": 2}, {"new": 3}]
    rows = await anyio.to_thread.run_sync(
        execute, file, "SELECT seq, crc IS NULL FROM checkpoint_records ORDER BY seq"
    )
    assert rows == [(1, 1), (2, 1), (3, 0)]
    (version,) = (
        await anyio.to_thread.run_sync(
            execute, file, "SELECT value FROM meta WHERE key = 'checkpoints'"
        )
    )[0]
    assert version == str(CHECKPOINT_SCHEMA_VERSION)
    # The new record is checked: its checksum cannot go missing unnoticed.
    await anyio.to_thread.run_sync(
        execute, file, "UPDATE checkpoint_records SET crc = NULL WHERE seq = 3"
    )
    async with SqliteCheckpointer(file) as cp:
        with pytest.raises(CheckpointCorrupt, match="record seq 3: its checksum is missing"):
            await cp.read("t")
        assert len(await cp.read("t", upto_seq=2)) == 2


async def test_a_lost_newest_record_is_corrupt_not_a_shorter_history(tmp_path: Path) -> None:
    # A gap shows in the seqs; a lost tail does not: the thread's head does.
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("t", [write(0, n=1), write(0, n=2), write(1, n=3)])
        await tamper(cp, "DELETE FROM checkpoint_records WHERE seq = 3")
        for read in (cp.read("t"), cp.read("t", path="main"), cp.read("t", upto_seq=5)):
            with pytest.raises(CheckpointCorrupt) as info:
                await read
            assert "thread 't': its records end at seq 2, but it was written up to seq 3" in str(
                info.value
            )
        assert [r.seq for r in await cp.read("t", upto_seq=2)] == [1, 2]
        with pytest.raises(CheckpointCorrupt, match="end at seq 2, but it was written up to seq 3"):
            await cp.threads()


async def test_a_thread_whose_records_all_vanished_is_not_left_out(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("a", [write(0)])
        await cp.put("b", [write(0)])
        await tamper(cp, "DELETE FROM checkpoint_records WHERE thread_id = 'b'")
        with pytest.raises(CheckpointCorrupt, match=r"1 thread\(s\) written to have no"):
            await cp.threads()
        with pytest.raises(CheckpointCorrupt, match="thread 'b': its records end at seq 0, but"):
            await cp.read("b")


async def test_a_deleted_thread_starts_again_from_seq_1(tmp_path: Path) -> None:
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        await cp.put("t", [write(0, n=1), write(0, n=2)])
        await cp.delete_thread("t")
        assert await cp.read("t") == []
        await cp.put("t", [write(0, n=3)])
        assert [(r.seq, r.data) for r in await cp.read("t")] == [(1, {"n": 3})]


async def test_another_checkpointers_writes_between_puts_are_numbered_after(
    tmp_path: Path,
) -> None:
    # A checkpointer numbers a put from the last seq it knows of, checked in the
    # statement: another's records, or a deletion, in between are not overwritten
    # or left as a gap.
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as a, SqliteCheckpointer(file) as b:
        await a.put("t", [write(0, n=1)])
        await a.put("t", [write(0, n=2)])
        await b.put("t", [write(0, n=3), write(0, n=4)])
        await a.put("t", [write(0, n=5)])  # a knew of seq 2, not 4
        assert [(r.seq, r.data["n"]) for r in await b.read("t")] == [
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 4),
            (5, 5),
        ]
        await b.delete_thread("t")
        await a.put("t", [write(0, n=6), write(0, n=7)])  # a knew of seq 5
        await b.put("t", [write(0, n=8)])
        assert [(r.seq, r.data["n"]) for r in await a.read("t")] == [(1, 6), (2, 7), (3, 8)]


async def test_a_version_2_file_gets_the_heads_of_its_threads(tmp_path: Path) -> None:
    file = tmp_path / "v2.db"
    await anyio.to_thread.run_sync(make_version_2_file, file)
    async with SqliteCheckpointer(file) as cp:
        assert len(await cp.read("t")) == 2
    await anyio.to_thread.run_sync(execute, file, "DELETE FROM checkpoint_records WHERE seq = 2")
    async with SqliteCheckpointer(file) as cp:
        with pytest.raises(CheckpointCorrupt, match="end at seq 1, but it was written up to seq 2"):
            await cp.read("t")

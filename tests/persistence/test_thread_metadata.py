"""SqliteThreadMetadata: a thread's time to live kept in its row under the row's checksum,
and a file of the first version (no ttl column) upgraded in place, its rows intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from deepactors.errors import CheckpointCorrupt
from deepactors.persistence.sqlite import SqliteThreadMetadata


async def test_a_ttl_reads_back_and_a_changed_one_is_corruption(tmp_path: Path) -> None:
    kept = SqliteThreadMetadata(tmp_path / "t.db")
    await kept.put("t1", {"owner": "ann"}, created_at=100.0, ttl=600.0)
    await kept.put("t2", {"owner": "bob"}, created_at=200.0)
    rows = {row.thread_id: row for row in await kept.all()}
    assert (rows["t1"].ttl, rows["t2"].ttl) == (600.0, None)
    await kept.put("t1", {"owner": "ann", "topic": "x"}, created_at=999.0, ttl=60.0)
    again = await kept.get("t1")
    assert again is not None
    assert (again.ttl, again.created_at, again.metadata["topic"]) == (60.0, 100.0, "x")
    with pytest.raises(ValueError, match="ttl"):
        await kept.put("t3", {}, created_at=1.0, ttl=float("inf"))
    with sqlite3.connect(tmp_path / "t.db") as raw:  # a longer life, written by hand
        raw.execute("UPDATE thread_metadata SET ttl = 1e9 WHERE thread_id = 't1'")
    with pytest.raises(CheckpointCorrupt, match="checksum"):
        await SqliteThreadMetadata(tmp_path / "t.db").get("t1")


async def test_a_file_of_the_first_version_is_upgraded_with_its_rows(tmp_path: Path) -> None:
    first = SqliteThreadMetadata(tmp_path / "t.db")
    await first.put("t1", {"owner": "ann"}, created_at=100.0)
    with sqlite3.connect(tmp_path / "t.db") as raw:  # as version 1 wrote it
        raw.execute("ALTER TABLE thread_metadata DROP COLUMN ttl_strategy")
        raw.execute("ALTER TABLE thread_metadata DROP COLUMN ttl")
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'thread_metadata'")
    upgraded = SqliteThreadMetadata(tmp_path / "t.db")
    row = await upgraded.get("t1")
    assert row is not None
    assert (row.metadata, row.ttl) == ({"owner": "ann"}, None)
    await upgraded.put("t1", {"owner": "ann"}, created_at=100.0, ttl=30.0)
    assert (await upgraded.get("t1")).ttl == 30.0


async def test_a_file_of_the_second_version_is_upgraded_and_reads_its_ttl(tmp_path: Path) -> None:
    second = SqliteThreadMetadata(tmp_path / "t.db")
    await second.put("t1", {"owner": "ann"}, created_at=100.0, ttl=60.0)
    with sqlite3.connect(tmp_path / "t.db") as raw:  # as version 2 wrote it
        raw.execute("ALTER TABLE thread_metadata DROP COLUMN ttl_strategy")
        raw.execute("UPDATE meta SET value = '2' WHERE key = 'thread_metadata'")
    upgraded = SqliteThreadMetadata(tmp_path / "t.db")
    row = await upgraded.get("t1")
    assert row is not None
    assert (row.ttl, row.ttl_strategy) == (60.0, "delete")


async def test_a_keep_latest_strategy_is_kept_under_the_checksum(tmp_path: Path) -> None:
    kept = SqliteThreadMetadata(tmp_path / "t.db")
    await kept.put("t1", {}, created_at=1.0, ttl=60.0, ttl_strategy="keep_latest")
    await kept.put("t2", {}, created_at=1.0, ttl=60.0)
    again = SqliteThreadMetadata(tmp_path / "t.db")
    assert [(r.thread_id, r.ttl_strategy) for r in await again.all()] == [
        ("t1", "keep_latest"),
        ("t2", "delete"),
    ]
    with pytest.raises(ValueError, match="ttl_strategy"):
        await kept.put("t3", {}, created_at=1.0, ttl=60.0, ttl_strategy="archive")  # type: ignore[arg-type]
    with sqlite3.connect(tmp_path / "t.db") as raw:  # turned into a delete, by hand
        raw.execute("UPDATE thread_metadata SET ttl_strategy = NULL WHERE thread_id = 't1'")
    with pytest.raises(CheckpointCorrupt, match="checksum"):
        await SqliteThreadMetadata(tmp_path / "t.db").get("t1")

"""A checksum per SQLite store item: an item changed behind our back is StoreCorrupt.

Every put (insert or update) sets the checksum in its own statement; every read
(get, list, search) checks it. A version 1 store opens, its old items unchecked
until they are next put.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import anyio.to_thread
import pytest

from deepactors.errors import StoreCorrupt
from deepactors.persistence import SqliteStore

SECRET = "s3cr3t-of-the-user"


def execute(file: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(file, isolation_level=None)) as raw:
        return raw.execute(sql, params).fetchall()


async def test_an_item_changed_behind_our_back_is_corrupt(tmp_path: Path) -> None:
    file = tmp_path / "store.db"
    async with SqliteStore(file, clock=lambda: 1000) as store:
        await store.put(("memories", "alice"), "prefs", {"tea": True})
        await store.put(("memories", "alice"), "prefs", {"tea": False})  # the update path
        await store.put(("memories", "bob"), "prefs", {"tea": True})
        item = await store.get(("memories", "alice"), "prefs")
        assert item is not None
        assert item.value == {"tea": False}
        await store.aclose()
        await anyio.to_thread.run_sync(
            execute,
            file,
            "UPDATE store_items SET value = ? WHERE namespace LIKE '%alice%'",
            (f'{{"tea":"{SECRET}"}}',),
        )
        for read in (
            store.get(("memories", "alice"), "prefs"),
            store.list(("memories", "alice")),
            store.search(("memories",)),
        ):
            with pytest.raises(StoreCorrupt) as info:
                await read
            text = str(info.value)
            assert 'store item ["memories","alice"] \'prefs\': its checksum does not match' in text
            assert SECRET not in text
        assert await store.get(("memories", "bob"), "prefs") is not None


@pytest.mark.parametrize("column", ["created_at", "updated_at", "key"])
async def test_every_field_is_covered(tmp_path: Path, column: str) -> None:
    file = tmp_path / "store.db"
    async with SqliteStore(file) as store:
        await store.put(("ns",), "k", {"v": 1})
        await store.aclose()
        value = "j" if column == "key" else 5.0
        await anyio.to_thread.run_sync(
            execute, file, f"UPDATE store_items SET {column} = ?", (value,)
        )
        with pytest.raises(StoreCorrupt, match="its checksum does not match"):
            await store.list(("ns",))


async def test_a_lost_checksum_is_corrupt(tmp_path: Path) -> None:
    file = tmp_path / "store.db"
    async with SqliteStore(file) as store:
        await store.put(("ns",), "k", {"v": 1})
        await store.aclose()
        await anyio.to_thread.run_sync(execute, file, "UPDATE store_items SET crc = NULL")
        with pytest.raises(StoreCorrupt, match="its checksum is missing"):
            await store.get(("ns",), "k")


def make_version_1_store(file: Path) -> None:
    with closing(sqlite3.connect(file, isolation_level=None)) as raw:
        raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        raw.execute("INSERT INTO meta VALUES ('store', '1')")
        raw.execute(
            "CREATE TABLE store_items (namespace TEXT NOT NULL, key TEXT NOT NULL,"
            " created_at REAL NOT NULL, updated_at REAL NOT NULL, value TEXT NOT NULL,"
            " PRIMARY KEY (namespace, key))"
        )
        for key in ("a", "b"):
            raw.execute(
                "INSERT INTO store_items VALUES ('[\"ns\"]', ?, 1.0, 1.0, '{\"old\":true}')",
                (key,),
            )


async def test_a_version_1_store_opens_its_old_items_unchecked(tmp_path: Path) -> None:
    file = tmp_path / "v1.db"
    await anyio.to_thread.run_sync(make_version_1_store, file)
    async with SqliteStore(file) as store:
        assert [i.value for i in await store.list(("ns",))] == [{"old": True}] * 2
        await store.put(("ns",), "b", {"new": True})  # an old item, put again: checked
        await store.put(("ns",), "c", {"new": True})
    rows = await anyio.to_thread.run_sync(
        execute, file, "SELECT key, crc IS NULL FROM store_items ORDER BY key"
    )
    assert rows == [("a", 1), ("b", 0), ("c", 0)]
    await anyio.to_thread.run_sync(
        execute, file, "UPDATE store_items SET crc = NULL WHERE key = 'c'"
    )
    async with SqliteStore(file) as store:
        with pytest.raises(StoreCorrupt, match="'c': its checksum is missing"):
            await store.list(("ns",))
        assert await store.get(("ns",), "a") is not None

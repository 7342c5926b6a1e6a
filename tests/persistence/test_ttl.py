"""Store items that expire (ExpiringStore), on memory and SQLite stores, both loops.

Time is the store's clock, moved by hand: nothing here sleeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepactors.errors import ConfigurationError
from deepactors.persistence import MemoryStore, SqliteStore, Store
from deepactors.persistence.index import IndexedStore
from deepactors.persistence.ttl import EXPIRY, ExpiringStore
from tests.persistence.test_index import bag_of_words

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def base(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")


async def test_an_item_expires_after_its_ttl_and_a_live_one_stays(base: Store) -> None:
    clock = Clock()
    store = ExpiringStore(base, clock=clock, refresh_on_read=False)
    await store.put(("n",), "short", {"v": 1}, ttl=10)
    await store.put(("n",), "forever", {"v": 2})
    clock.now += 9
    assert (await store.get(("n",), "short")) is not None
    clock.now += 2
    assert await store.get(("n",), "short") is None
    assert await base.get(("n",), "short") is None  # deleted when found expired
    assert [i.key for i in await store.search(("n",))] == ["forever"]
    assert [i.key for i in await store.list(("n",))] == ["forever"]


async def test_reads_refresh_the_ttl_unless_told_not_to(base: Store) -> None:
    clock = Clock()
    store = ExpiringStore(base, clock=clock)
    await store.put(("n",), "k", {"v": 1}, ttl=10)
    for _ in range(3):
        clock.now += 8
        assert await store.get(("n",), "k") is not None  # each read: 10 more seconds
    clock.now += 8
    assert [i.key for i in await store.search(("n",), refresh_ttl=False)] == ["k"]
    clock.now += 3
    assert await store.get(("n",), "k", refresh_ttl=False) is None


async def test_the_default_ttl_and_a_sweep(base: Store) -> None:
    clock = Clock()
    store = ExpiringStore(base, clock=clock, default_ttl=60)
    for key in ("a", "b", "c"):
        await store.put(("n", key), key, {"v": key})
    await store.put(("n", "c"), "c", {"v": "c"}, ttl=600)
    clock.now += 61
    assert await store.sweep() == 2
    assert [i.key for i in await base.search(("n",))] == ["c"]
    assert {i.namespace[0] for i in await base.search(())} == {"n", EXPIRY}
    assert await store.sweep() == 0


async def test_expiry_composes_with_an_index(base: Store) -> None:
    clock = Clock()
    indexed = IndexedStore(base, embed=bag_of_words, fields=["$"])
    store = ExpiringStore(indexed, clock=clock)
    await store.put(("n",), "cat", {"text": "the cat"}, ttl=5)
    await store.put(("n",), "dog", {"text": "the dog"})
    assert {i.key for i, _ in await store.semantic_search(("n",), "cat")} == {"cat", "dog"}
    clock.now += 6
    assert [i.key for i, _ in await store.semantic_search(("n",), "cat")] == ["dog"]


async def test_bad_ttls_are_refused(base: Store) -> None:
    store = ExpiringStore(base)
    for ttl in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="ttl"):
            await store.put(("n",), "k", {"v": 1}, ttl=ttl)
    with pytest.raises(ValueError, match="reserved"):
        await store.put((EXPIRY,), "k", {"v": 1})
    with pytest.raises(ConfigurationError):
        ExpiringStore(base, default_ttl=-5)
    with pytest.raises(ConfigurationError):
        ExpiringStore(base, sweep_interval=0)


async def test_serve_settings_make_an_expiring_store(tmp_path: Path) -> None:
    import json

    import anyio.to_thread

    from deepactors.server._langgraph_json import expiring

    plain = MemoryStore()
    assert await anyio.to_thread.run_sync(expiring, plain, None, None) is plain
    flagged = await anyio.to_thread.run_sync(expiring, plain, None, 30.0)
    assert isinstance(flagged, ExpiringStore)
    assert flagged.default_ttl == 1800
    path = tmp_path / "langgraph.json"
    ttl = {"default_ttl": 10, "refresh_on_read": False, "sweep_interval_minutes": 2}
    path.write_text(json.dumps({"graphs": {}, "store": {"ttl": ttl}}))
    configured = await anyio.to_thread.run_sync(expiring, plain, path, None)
    assert isinstance(configured, ExpiringStore)
    assert (configured.default_ttl, configured.refresh_on_read) == (600, False)
    assert configured.sweep_interval == 120
    path.write_text(json.dumps({"graphs": {}, "store": {"ttl": {"default_ttl": "soon"}}}))
    with pytest.raises(ConfigurationError, match="default_ttl"):
        await anyio.to_thread.run_sync(expiring, plain, path, None)

"""Store semantics, the same for MemoryStore and SqliteStore, on asyncio and trio."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from deepactors.persistence import SqliteStore, Store

from .conftest import Clock


async def test_put_get_round_trip_and_replace(
    make_store: Callable[..., Store], clock: Clock
) -> None:
    store = make_store(clock=clock)
    assert await store.get(("ns",), "k") is None
    await store.put(("ns",), "k", {"v": [1, "é"]})
    first = await store.get(("ns",), "k")
    assert first is not None
    assert (first.namespace, first.key, first.value) == (("ns",), "k", {"v": [1, "é"]})
    assert first.created_at == first.updated_at == clock.now
    clock.now += 1.5
    await store.put(("ns",), "k", {"v": 2})
    second = await store.get(("ns",), "k")
    assert second is not None
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at == first.updated_at + 1.5


async def test_values_are_copied_in_and_out(store: Store) -> None:
    value = {"a": [1, 2]}
    await store.put(("ns",), "k", value)
    value["a"].append(3)
    item = await store.get(("ns",), "k")
    assert item is not None
    assert item.value == {"a": [1, 2]}
    item.value["a"].append(4)
    again = await store.get(("ns",), "k")
    assert again is not None
    assert again.value == {"a": [1, 2]}


async def test_bad_values_and_namespaces_are_refused(store: Store) -> None:
    with pytest.raises(TypeError):
        await store.put(("ns",), "bad", {"x": object()})
    with pytest.raises(ValueError, match="namespace"):
        await store.put((), "k", {})
    with pytest.raises(ValueError, match="namespace"):
        await store.get(("ns", ""), "k")
    assert await store.list(("ns",)) == []


async def test_list_sees_exactly_one_namespace_sorted_by_key(store: Store) -> None:
    await store.put(("ns",), "k2", {})
    await store.put(("ns",), "k", {})
    await store.put(("ns",), "other", {})
    await store.put(("ns", "sub"), "k3", {})
    await store.put(("nsx",), "k4", {})
    assert [i.key for i in await store.list(("ns",))] == ["k", "k2", "other"]
    assert [i.key for i in await store.list(("ns",), prefix="k")] == ["k", "k2"]
    assert [i.key for i in await store.list(("ns", "sub"))] == ["k3"]
    assert await store.list(("ns",), prefix="zz") == []


async def test_search_spans_namespaces_below_the_prefix(store: Store) -> None:
    for ns in [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a b",), ('a"',), ("b",)]:
        await store.put(ns, "key", {"ns": list(ns)})
        await store.put(ns, "other", {})
    found = [(i.namespace, i.key) for i in await store.search(("a",))]
    assert found == [
        (("a",), "key"),
        (("a",), "other"),
        (("a", "b"), "key"),
        (("a", "b"), "other"),
        (("a", "b", "c"), "key"),
        (("a", "b", "c"), "other"),
    ]
    assert [i.namespace for i in await store.search(("a", "b"), key_prefix="k")] == [
        ("a", "b"),
        ("a", "b", "c"),
    ]
    everything = await store.search(())
    assert len(everything) == 14
    assert [(i.namespace, i.key) for i in everything] == sorted(
        (i.namespace, i.key) for i in everything
    )


async def test_prefixes_are_literal_not_patterns(store: Store) -> None:
    await store.put(("ns",), "a%b", {})
    await store.put(("ns",), "axb", {})
    await store.put(("ns",), "A_b", {})
    assert [i.key for i in await store.list(("ns",), prefix="a%")] == ["a%b"]
    assert [i.key for i in await store.list(("ns",), prefix="a")] == ["a%b", "axb"]
    assert [i.key for i in await store.search(("ns",), key_prefix="A_")] == ["A_b"]


async def test_delete_removes_one_key(store: Store) -> None:
    await store.put(("ns",), "k", {})
    await store.put(("ns",), "k2", {})
    await store.delete(("ns",), "k")
    await store.delete(("ns",), "missing")
    assert await store.get(("ns",), "k") is None
    assert [i.key for i in await store.list(("ns",))] == ["k2"]


async def test_works_through_the_protocol_alone(store: Store) -> None:
    # What StoreBackend and the memory middleware do with any store.
    assert isinstance(store, Store)
    await store.put(("a", "b"), "k", {"v": 1})
    await store.put(("a",), "k", {"v": 0})
    assert [i.value for i in await store.list(("a", "b"))] == [{"v": 1}]
    assert [i.namespace for i in await store.search(("a",))] == [("a",), ("a", "b")]
    await store.delete(("a", "b"), "k")
    assert await store.get(("a", "b"), "k") is None


async def test_sqlite_store_persists_across_connections(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        await store.put(("memories", "alice"), "prefs", {"tea": True})
    async with SqliteStore(tmp_path / "s.db") as again:
        item = await again.get(("memories", "alice"), "prefs")
        assert item is not None
        assert item.value == {"tea": True}


@pytest.mark.parametrize("value", [[1, 2], "text", 3, None, ("a", 1)])
async def test_a_value_that_is_not_a_dict_is_refused_and_stores_nothing(
    store: Store, value: object
) -> None:
    await store.put(("ns",), "ok", {"v": 1})
    with pytest.raises(TypeError, match="must be a dict"):
        await store.put(("ns",), "bad", value)  # type: ignore[arg-type]
    # The namespace stays readable: nothing of the bad value was stored.
    assert await store.get(("ns",), "bad") is None
    assert [i.key for i in await store.list(("ns",))] == ["ok"]
    assert [i.key for i in await store.search(("ns",))] == ["ok"]


async def test_a_value_with_a_key_that_is_not_a_string_is_refused(store: Store) -> None:
    with pytest.raises(TypeError, match=re.escape("int key 1 at ['a']")):
        await store.put(("ns",), "k", {"a": {1: "x", "1": "y"}})
    assert await store.list(("ns",)) == []


async def test_lone_surrogates_in_values_round_trip(store: Store) -> None:
    lone = json.loads('"\\udcff"')
    await store.put(("ns",), "k", {"name": f"file-{lone}.txt", lone: lone})
    item = await store.get(("ns",), "k")
    assert item is not None
    assert item.value == {"name": f"file-{lone}.txt", lone: lone}


async def test_keys_and_namespaces_with_a_lone_surrogate_are_refused(store: Store) -> None:
    lone = json.loads('"\\udcff"')
    with pytest.raises(ValueError, match="lone surrogate"):
        await store.put(("ns",), lone, {})
    with pytest.raises(ValueError, match="lone surrogate"):
        await store.put(("ns", lone), "k", {})
    with pytest.raises(ValueError, match="lone surrogate"):
        await store.search((lone,))
    with pytest.raises(TypeError, match="string"):
        await store.put(("ns",), 1, {})  # type: ignore[arg-type]
    assert await store.search(()) == []

"""Semantic search over a store (IndexedStore), on memory and SQLite stores, both loops.

The embedding is a small deterministic bag of words (the boundary: a model's
embeddings), so which item is nearest is known in advance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from deepactors.errors import ConfigurationError
from deepactors.persistence import MemoryStore, SqliteStore, Store
from deepactors.persistence.index import VECTORS, IndexedStore
from deepactors.server._langgraph_json import indexed

pytestmark = pytest.mark.anyio

WORDS = ("cat", "dog", "mat", "sat", "ran", "park", "rain", "sun", "weather", "pet")


def bag_of_words(texts: Sequence[str]) -> list[list[float]]:
    """A vector per text: how often each of WORDS occurs in it (normalized)."""
    out = []
    for text in texts:
        tokens = [t.strip(".,?!").lower() for t in text.split()]
        counts = [float(tokens.count(w)) for w in WORDS]
        size = math.sqrt(sum(c * c for c in counts)) or 1.0
        out.append([c / size for c in counts])
    return out


async def async_bag_of_words(texts: Sequence[str]) -> list[list[float]]:
    return bag_of_words(texts)


class LangChainLike:
    """The two async methods of a LangChain ``Embeddings`` that are used."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return bag_of_words(texts)

    async def aembed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return bag_of_words([text])[0]


@pytest.fixture(params=["memory", "sqlite"])
def base(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")


NOTES = {
    "n1": {"text": "the cat sat on the mat", "topic": "pets"},
    "n2": {"text": "the dog ran in the park", "topic": "pets"},
    "n3": {"text": "rain and sun: the weather", "topic": "weather"},
}


async def filled(store: IndexedStore) -> IndexedStore:
    for key, value in NOTES.items():
        await store.put(("notes", "alice"), key, value)
    return store


@pytest.mark.parametrize("embed", [bag_of_words, async_bag_of_words, LangChainLike()])
async def test_items_are_found_by_meaning_best_first(base: Store, embed: Any) -> None:
    store = await filled(IndexedStore(base, embed=embed, dims=len(WORDS), fields=["text"]))
    found = await store.semantic_search(("notes",), "where did the cat sit on a mat?")
    assert found[0][0].key == "n1"
    scores = [score for _, score in found]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > 0.5
    weather = await store.semantic_search(("notes",), "sun or rain?", limit=1)
    assert [item.key for item, _ in weather] == ["n3"]
    pets = await store.semantic_search(("notes",), "weather", filter={"topic": "pets"})
    assert {item.key for item, _ in pets} == {"n1", "n2"}
    assert len(await store.semantic_search(("notes",), "cat", offset=1, limit=5)) == 2


async def test_the_index_is_kept_up_to_date_and_hidden(base: Store) -> None:
    store = await filled(IndexedStore(base, embed=bag_of_words, fields=["text"]))
    await store.put(("notes", "alice"), "n1", {"text": "the weather is rain"})
    # n1 no longer speaks of a cat: nothing does.
    assert all(score == 0 for _, score in await store.semantic_search(("notes",), "cat mat"))
    await store.delete(("notes", "alice"), "n2")
    assert "n2" not in {i.key for i, _ in await store.semantic_search(("notes",), "dog park")}
    # The vectors live in the same store, under a namespace the wrapper hides.
    assert all(i.namespace[0] != VECTORS for i in await store.search(()))
    assert {i.key for i in await store.search(("notes",))} == {"n1", "n3"}
    assert await store.list((VECTORS, "notes", "alice")) == []
    with pytest.raises(ValueError, match="reserved"):
        await store.put((VECTORS,), "k", {"text": "x"})


async def test_fields_and_whole_values(base: Store) -> None:
    store = IndexedStore(base, embed=bag_of_words, fields=["$"])
    await store.put(("n",), "a", {"note": {"body": "cat"}})
    await store.put(("n",), "b", {"note": {"body": "weather"}})
    assert (await store.semantic_search(("n",), "cat"))[0][0].key == "a"
    nested = IndexedStore(base, embed=bag_of_words, fields=["note.body"])
    await nested.put(("m",), "c", {"note": {"body": "dog park"}})
    await nested.put(("m",), "d", {"other": "cat"})  # no indexed field: not embedded
    assert [i.key for i, _ in await nested.semantic_search(("m",), "cat dog")] == ["c"]


async def test_a_wrong_embedding_is_refused_and_nothing_stored(base: Store) -> None:
    store = IndexedStore(base, embed=bag_of_words, dims=3, fields=["text"])
    with pytest.raises(ValueError, match="dims=3"):
        await store.put(("n",), "a", {"text": "cat"})
    assert await base.get(("n",), "a") is None

    def nan(texts: Sequence[str]) -> list[list[float]]:
        return [[math.nan] for _ in texts]

    with pytest.raises(ValueError, match="non-finite"):
        await IndexedStore(base, embed=nan).put(("n",), "b", {"text": "cat"})
    with pytest.raises(ConfigurationError):
        IndexedStore(base, embed="not callable")
    with pytest.raises(ConfigurationError):
        IndexedStore(base, embed=bag_of_words, fields=[])


async def test_langgraph_json_store_index(tmp_path: Path) -> None:
    (tmp_path / "embeddings.py").write_text(
        "from tests.persistence.test_index import bag_of_words as embed\n"
    )
    config = {
        "graphs": {"agent": "./agent.py:agent"},
        "store": {
            "index": {"embed": "./embeddings.py:embed", "dims": len(WORDS), "fields": ["text"]}
        },
    }
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps(config))
    store = await anyio.to_thread.run_sync(indexed, MemoryStore(), path)
    assert isinstance(store, IndexedStore)
    await filled(store)
    assert (await store.semantic_search(("notes",), "cat"))[0][0].key == "n1"
    plain = MemoryStore()
    path.write_text(json.dumps({"graphs": config["graphs"]}))
    assert await anyio.to_thread.run_sync(indexed, plain, path) is plain

"""Semantic store search through langgraph-sdk's ``client.store.search_items(query=...)``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from deepactors.persistence import MemoryStore
from deepactors.persistence.index import IndexedStore
from deepactors.server import create_app
from tests.persistence.test_index import NOTES, WORDS, bag_of_words

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]


def test_search_by_meaning_with_an_index(serve: Serve) -> None:
    store = IndexedStore(MemoryStore(), embed=bag_of_words, dims=len(WORDS), fields=["text"])
    client = serve(create_app({"echo": blocking_agent(Probe())}, store=store)).client()
    for key, value in NOTES.items():
        client.store.put_item(["notes", "alice"], key, value)
    found = client.store.search_items(["notes"], query="where did the cat sit?", limit=2)
    items = found["items"]
    assert items[0]["key"] == "n1"
    assert items[0]["score"] > items[1]["score"]
    pets = client.store.search_items(["notes"], query="rain", filter={"topic": "pets"})
    assert {i["key"] for i in pets["items"]} == {"n1", "n2"}
    # Without a query: every item, as before, unscored.
    plain = client.store.search_items(["notes"])["items"]
    assert {i["key"] for i in plain} == set(NOTES)
    assert {i["score"] for i in plain} == {None}
    # The index's own namespaces stay hidden.
    assert client.store.list_namespaces()["namespaces"] == [["notes", "alice"]]


def test_a_query_without_an_index_says_how_to_get_one(serve: Serve) -> None:
    client = serve(create_app({"echo": blocking_agent(Probe())})).client()
    with pytest.raises(UnprocessableEntityError) as refused:
        client.store.search_items(["notes"], query="cat")
    assert "IndexedStore" in refused.value.response.json()["detail"]

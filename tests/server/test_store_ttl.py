"""Store items' time to live through langgraph-sdk (put_item(ttl=), get_item(refresh_ttl=))."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from deepactors.persistence import MemoryStore
from deepactors.persistence.ttl import ExpiringStore
from deepactors.server import create_app
from tests.persistence.test_ttl import Clock

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]


def test_an_expired_item_is_gone_and_a_live_one_untouched(serve: Serve) -> None:
    clock = Clock()
    store = ExpiringStore(MemoryStore(), clock=clock)
    client = serve(create_app({"echo": blocking_agent(Probe())}, store=store)).client()
    client.store.put_item(["notes"], "brief", {"t": 1}, ttl=1)  # one minute
    client.store.put_item(["notes"], "kept", {"t": 2})
    clock.now += 50
    assert client.store.get_item(["notes"], "brief", refresh_ttl=False)["value"] == {"t": 1}
    clock.now += 11
    assert client.store.get_item(["notes"], "brief") is None
    assert [i["key"] for i in client.store.search_items(["notes"])["items"]] == ["kept"]
    assert client.store.get_item(["notes"], "kept")["value"] == {"t": 2}


def test_ttl_without_an_expiring_store_says_how_and_reserved_names_are_refused(
    serve: Serve,
) -> None:
    client = serve(create_app({"echo": blocking_agent(Probe())})).client()
    with pytest.raises(UnprocessableEntityError) as refused:
        client.store.put_item(["notes"], "k", {"t": 1}, ttl=5)
    assert "--store-ttl" in refused.value.response.json()["detail"]
    with pytest.raises(UnprocessableEntityError):
        client.store.put_item(["__expiry__", "notes"], "k", {"t": 1})

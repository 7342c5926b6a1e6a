"""A store keeps strict JSON: NaN and Infinity are refused, on every kind of store.

Store items are served to clients as JSON (``GET /store/items``), whose parsers
cannot read NaN or Infinity; an item holding one would make every later read of
it fail. A checkpoint may hold them (only deepactors reads it back).
"""

from __future__ import annotations

import math

import pytest

from deepactors.persistence import Store

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_number_is_refused_and_nothing_is_stored(
    store: Store, bad: float
) -> None:
    await store.put(("u", "notes"), "k", {"v": 1})
    with pytest.raises(ValueError, match="not JSON-compatible"):
        await store.put(("u", "notes"), "k", {"deep": [1, {"x": bad}]})
    with pytest.raises(ValueError, match="not JSON-compatible"):
        await store.put(("u", "notes"), "other", {"x": bad})
    item = await store.get(("u", "notes"), "k")
    assert item is not None
    assert item.value == {"v": 1}
    assert await store.get(("u", "notes"), "other") is None
    assert [i.key for i in await store.search(("u",))] == ["k"]

"""open_runtime(freeze_heap=True): objects leave the collector's sight, then come back."""

from __future__ import annotations

import gc

import anyio

from deepactors import create_deep_agent, open_runtime
from deepactors.models import FunctionModel


async def test_a_runtime_keeps_the_heap_frozen_only_when_asked_and_only_while_open() -> None:
    assert gc.get_freeze_count() == 0
    agent = create_deep_agent(FunctionModel(lambda request: "hi"))
    async with open_runtime() as rt:
        assert gc.get_freeze_count() == 0  # not without asking
        await rt.ainvoke(agent, "go")
    async with open_runtime(freeze_heap=True) as rt:
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # modules, classes, the compiled agent
        result = await rt.ainvoke(agent, "go")
        assert result["messages"][-1].text == "hi"
        made_since = [[] for _ in range(5000)]  # tracked objects, not frozen
        async with open_runtime(freeze_heap=True):
            # Nested: nothing frozen again (these would be), nothing thawed.
            assert frozen // 2 < gc.get_freeze_count() < frozen + len(made_since)
        assert frozen // 2 < gc.get_freeze_count()  # the outer runtime still holds it
        del made_since
    assert gc.get_freeze_count() == 0


async def test_the_heap_thaws_when_the_runtime_fails() -> None:
    class Boom(Exception):
        pass

    try:
        with anyio.fail_after(5):
            async with open_runtime(freeze_heap=True):
                raise Boom
    except* Boom:
        pass
    assert gc.get_freeze_count() == 0

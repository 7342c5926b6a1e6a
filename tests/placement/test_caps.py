"""The fan-out caps hold over children on Ray workers: a run's
``max_concurrent_subagents`` and the tree's ``max_concurrent_subagents_total``
are held by the parent, before a child is sent to any worker."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deepactors.events import ToolCallStarted
from deepactors.placement import RayPlacement
from tests.placement.agents import answers, parent, say
from tests.placement.helpers import live_children


@pytest.mark.parametrize("cap", ["max_concurrent_subagents", "max_concurrent_subagents_total"])
async def test_a_cap_holds_over_the_workers(
    placement: RayPlacement, tmp_path: Path, cap: str
) -> None:
    agent = parent(placement, **{cap: 2})
    gate = tmp_path / "open"
    waiting = 0
    with anyio.fail_after(60):
        async with agent.astream(say([("w", f"gate {gate}")] * 6)) as events:
            async for event in events:
                if isinstance(event, ToolCallStarted) and event.call.name == "wait_for_file":
                    waiting += 1
                    if waiting == 2:
                        # Two wait at the gate; the other four were never sent.
                        assert await live_children(placement) == 2
                        gate.touch()
        result = events.result
    assert [s for s, _ in answers(result)] == ["success"] * 6

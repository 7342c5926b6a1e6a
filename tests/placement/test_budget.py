"""A tree-wide budget holds over children on Ray workers: every model call they
make is reserved in the parent's ledger first, so a limit is never passed."""

from __future__ import annotations

import anyio

from deepactors import Budget
from deepactors.placement import RayPlacement
from tests.placement.agents import answers, parent, say


async def test_model_calls_stop_exactly_at_the_limit(placement: RayPlacement) -> None:
    agent = parent(placement)
    # 1 parent call, then 12 children x 3 calls wanted: 20 allowed in all.
    with anyio.fail_after(60):
        result = await agent.ainvoke(say([("w", "steps 3")] * 12), budget=Budget(model_calls=20))
    report = result["budget"]
    assert report.model_calls == 20
    assert "model_calls" in report.exhausted
    # The calls made (each reports one request, the parent's and the children's).
    assert result["usage"].requests == 20
    assert result["messages"][-1].stop_reason == "budget_exhausted"


async def test_calls_wait_for_room_and_all_fit(placement: RayPlacement) -> None:
    # Each call reserves the default 4,096 output tokens: two fit at once, the
    # rest wait for earlier calls to settle (each uses 5).
    agent = parent(placement)
    with anyio.fail_after(60):
        result = await agent.ainvoke(say([("w", "steps 2")] * 8), budget=Budget(output_tokens=9000))
    assert all(status == "success" for status, _ in answers(result)), answers(result)
    report = result["budget"]
    assert report.model_calls == 1 + 8 * 2 + 1
    assert report.output_tokens == 5 * report.model_calls

"""A parent's deadline and cancel scope reach its children on Ray workers: their
tasks end there (as Ray's state API shows), and a child's own timeout ends it."""

from __future__ import annotations

import functools
import time
from typing import Any

import anyio
import pytest

from deepactors.events import ToolCallStarted
from deepactors.placement import RayPlacement
from tests.placement.agents import answers, parent, say, worker_subagent
from tests.placement.helpers import live_children, until

ray = pytest.importorskip("ray")


def running_batches(since: float) -> list[Any]:
    """The workers' ``run`` tasks (batches of children) Ray's state API lists as
    running, of those started at ``since`` (a ``time.time()``) or later: its task
    events lag by up to a second, so a batch of an earlier test on the same workers,
    already ended, may still be listed as running."""
    from ray.util.state import list_tasks

    tasks = list_tasks(
        address=_this_ray(),
        filters=[("state", "=", "RUNNING")],
        limit=1000,
        detail=True,  # for start_time_ms
        raise_on_missing_output=False,
    )
    return [
        t
        for t in tasks
        if t.func_or_class_name.endswith("PlacementWorker.run")
        and (t.start_time_ms or 0) >= since * 1000
    ]


def _this_ray() -> str:
    """This test's Ray, by its address: with none, the state API refuses to pick
    when another Ray runs on the machine (another test run's)."""
    return str(ray.get_runtime_context().gcs_address)


async def state_api_running(since: float) -> list[Any]:
    return await anyio.to_thread.run_sync(running_batches, since)


async def test_a_parent_deadline_ends_every_child_on_the_workers(placement: RayPlacement) -> None:
    agent = parent(placement)
    n = 40
    waiting = 0
    passed = 0.0
    batches: list[Any] = []
    began = time.time()
    running = functools.partial(state_api_running, began)
    with anyio.fail_after(60):
        with anyio.CancelScope() as scope:
            async with agent.astream(say([("w", "wait")] * n)) as events:
                async for event in events:
                    if isinstance(event, ToolCallStarted) and event.call.name == "wait_here":
                        waiting += 1
                    if waiting == n and not passed:
                        # Every child waits in its tool: Ray lists their batches
                        # as running (its task events lag by up to a second).
                        batches = await until(running, bool)
                        passed = time.time()
                        scope.deadline = anyio.current_time()  # the deadline passes now
        assert scope.cancelled_caught
        await until(running, lambda listed: not listed)
    assert await live_children(placement) == 0
    # The batches that ran ended once their children were cancelled (Ray's record;
    # bench/w11_ray.py --deadline measures how soon).
    from ray.util.state import get_task

    for batch in batches:
        task = await anyio.to_thread.run_sync(
            functools.partial(get_task, batch.task_id, address=_this_ray())
        )
        assert task.state == "FINISHED"
        assert task.end_time_ms / 1000 > passed


async def test_a_childs_own_timeout_ends_it_on_its_worker(placement: RayPlacement) -> None:
    # The quick sibling has no timeout: on a loaded machine its round trip
    # (a batch window, a pull's linger) may itself pass half a second.
    agent = parent(placement, [worker_subagent(timeout=0.5), worker_subagent("q")])
    with anyio.fail_after(60):
        result = await agent.ainvoke(say([("w", "wait"), ("q", "echo quick")]))
        (s1, slow), (s2, quick) = answers(result)
        assert (s1, s2) == ("error", "success")
        assert "did not finish within its 0.5 s timeout" in slow
        assert quick == "echo: quick"
        await until(lambda: live_children(placement), lambda live: live == 0)

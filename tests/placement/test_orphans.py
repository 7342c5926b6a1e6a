"""A worker that hears nothing from a parent: it cancels the parent's children and
keeps their ends for it; silent on, it drops the link and tells a parent that comes
back; a worker that could not run meanwhile does not take its own silence for the
parent's.

The worker here is the real :class:`PlacementWorker`, driven on the test's own
loop (the body of the Ray actor, without Ray between it and its caller), on
virtual time: a parent silent for seconds, or a worker process starved for them,
is a jump of the clock.
"""

from __future__ import annotations

import anyio
import pytest

from deepactors.actors import ChildOutcome
from deepactors.placement._ship import SpecPayload
from deepactors.placement._wire import Done, Dropped, Emitted, ParentView, Report, Start
from deepactors.placement._worker import PlacementWorker
from tests.vtime import jump

pytestmark = pytest.mark.virtual_time

TIMEOUT = 1.0  # the worker's orphan_timeout: its watch looks every quarter of it
SPEC = {"w": SpecPayload("tests.placement.agents:waiting_child", None)}


def start(cid: int) -> Start:
    """A child that waits in a tool until it is cancelled."""
    parent = ParentView(
        path="main",
        run_id="run",
        thread_id=None,
        agent_name="main",
        depth=0,
        context=None,
        decisions={},
        awaiting={},
        max_steps=None,
        listening=False,
        detail=False,
    )
    return Start(
        cid=cid,
        agent="w",
        description="wait",
        path=f"main/task-{cid}",
        label=f"task-{cid}",
        files={},
        parent=parent,
        deadline=None,
        budget=None,
        trace={},
        durable=False,
        restored=None,
    )


async def pull(worker: PlacementWorker) -> list[Report]:
    """One pull, as the parent makes it (it does not linger: the test reads at once)."""
    return await worker.pull("link", 0.0, 0.0, 512)


def outcomes(reports: list[Report]) -> dict[int, ChildOutcome | None]:
    return {r.cid: r.outcome for r in reports if isinstance(r, Done)}


async def test_a_silent_parent_s_children_are_cancelled_and_their_ends_kept() -> None:
    worker = PlacementWorker(orphan_timeout=TIMEOUT, pacing=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, "link", SPEC, [start(1), start(2)])
        await anyio.sleep(0.1)
        assert not outcomes(await pull(worker))  # both wait in their tool
        assert (await worker.statistics()).running == 2
        await anyio.sleep(TIMEOUT * 2)  # the parent says nothing
        assert (await worker.statistics()).running == 0
        # The parent is heard again (a loop held up, not gone): it reads both as failed.
        ended = outcomes(await pull(worker))
        assert sorted(ended) == [1, 2]
        for outcome in ended.values():
            assert outcome is not None
            assert outcome.status == "failed"
            assert "heard nothing from its parent for more than 1 s" in outcome.answer
            assert "orphan_timeout" in outcome.answer
        # The link lives on: a child started now runs (and is cancelled by its parent).
        tg.start_soon(worker.run, "link", SPEC, [start(3)])
        await anyio.sleep(0.1)
        assert (await worker.statistics()).running == 1
        tg.cancel_scope.cancel()


async def test_a_link_silent_on_is_dropped_and_a_parent_back_is_told() -> None:
    worker = PlacementWorker(orphan_timeout=TIMEOUT, pacing=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, "link", SPEC, [start(1)])
        await anyio.sleep(0.1)
        await pull(worker)
        # Silent through the cancel and as long again: the child's end is dropped
        # with the link (no parent reads it, and the worker must not keep it forever).
        await anyio.sleep(TIMEOUT * 4)
        assert (await worker.statistics()).links == 0
        (dropped,) = await pull(worker)
        assert isinstance(dropped, Dropped)
        assert dropped.reports == 1
        assert dropped.unheard > TIMEOUT * 2
        # Told once: the link starts afresh.
        assert await pull(worker) == []
        tg.cancel_scope.cancel()


async def test_a_starved_worker_does_not_take_its_silence_for_the_parent_s() -> None:
    worker = PlacementWorker(orphan_timeout=TIMEOUT, pacing=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, "link", SPEC, [start(1)])
        await anyio.sleep(0.1)
        await pull(worker)
        # The worker's process gets no CPU for 10 timeouts (a loaded machine): the
        # parent's calls wait in Ray's queue meanwhile, so it is not silent.
        jump(TIMEOUT * 10)
        await anyio.sleep(TIMEOUT / 2)
        assert (await worker.statistics()).running == 1
        assert not [r for r in await pull(worker) if not isinstance(r, Emitted)]
        # Truly silent after that: cancelled as before.
        await anyio.sleep(TIMEOUT * 2)
        assert (await worker.statistics()).running == 0
        tg.cancel_scope.cancel()

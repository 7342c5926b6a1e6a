"""Children placed over the nodes of a cluster: each node's worker runs its
share, every answer and file merges in the parent, and a node that goes away
fails only the children it ran, and the next go to the node that is left.

(A node added back to the cluster after a node was taken away is declared dead by
Ray's health checks here when this package runs after tests/placement in one
process: what a node joining does is left to Ray's own tests.)"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import anyio
from ray.cluster_utils import Cluster

from deepactors.events import ToolCallStarted
from deepactors.placement import RayPlacement
from tests.placement.agents import answers, parent, say
from tests.placement.helpers import until
from tests.placement_nodes.conftest import worker_nodes


async def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_children_on_two_nodes_merge_and_a_node_that_goes_fails_only_its_own(
    placement: RayPlacement, cluster: Cluster, tmp_path: Path
) -> None:
    agent = parent(placement)
    n = 8
    orders = [("w", f"write /n{i}.txt note {i}") for i in range(n)]
    with anyio.fail_after(120):
        result = await agent.ainvoke(say(orders))
    assert [(s, t.split("\n")[0]) for s, t in answers(result)] == [
        ("success", f"wrote /n{i}.txt") for i in range(n)
    ]
    assert {f"/n{i}.txt" for i in range(n)} <= set(result["files"])
    assert result["files"]["/n3.txt"].content == "note 3"
    stats = await placement.worker_statistics()
    # One worker on each node, and both ran children (the least busy gets the next).
    assert len({s.where.node_id for s in stats}) == 2
    assert all(s.finished > 0 for s in stats)
    # Now one node goes while every child waits at its gate.
    gate = tmp_path / "open"
    n = 10
    waiting = 0
    with anyio.fail_after(180):
        async with agent.astream(say([("w", f"gate {gate}")] * n)) as events:
            async for event in events:
                if isinstance(event, ToolCallStarted) and event.call.name == "wait_for_file":
                    waiting += 1
                    if waiting == n:  # every child waits at its gate: one node goes
                        first, _ = await placement.worker_statistics()
                        (gone,) = [
                            node
                            for node in worker_nodes(cluster)
                            if node.node_id == first.where.node_id
                        ]
                        await anyio.to_thread.run_sync(cluster.remove_node, gone, False)
                        pid = first.where.pid
                        await until(functools.partial(_alive, pid), lambda alive: not alive)
                        gate.touch()  # the other node's children may finish now
        result = events.result
    results = answers(result)
    failed = [text for status, text in results if status == "error"]
    passed = [text for status, text in results if status == "success"]
    assert len(failed) == len(passed) == n // 2
    assert all("died or cannot be reached" in text for text in failed)
    assert all(text == f"passed {gate}" for text in passed)
    # The lost worker's replacement waits for a CPU (no node has one free):
    # meanwhile children go to the worker that is up, and do not wait for it.
    with anyio.fail_after(60):
        meanwhile = await agent.ainvoke(say([("w", "echo meanwhile")] * 4))
    assert [s for s, _ in answers(meanwhile)] == ["success"] * 4

"""A Ray cluster of three nodes on this machine (``ray.cluster_utils``): a head
with no CPU of its own and two nodes of one CPU each, so a placement's two
worker actors run one on each node, and a node can be taken away. One cluster
per test: a test takes a node away.

A package of its own: a process holds one Ray connection at a time, and the
single-node tests of ``tests/placement`` have theirs (pytest ends that
package's Ray before it starts this one, and the other way round).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from deepactors.placement import RayPlacement  # noqa: E402

ROOT = Path(__file__).parents[2]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """The head and two one-CPU nodes, this process connected as the driver."""
    assert Path.cwd() == ROOT, "run the placement tests from the checkout's root"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_DISABLE_USAGE_STATS", "1")
        nodes = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "include_dashboard": False,
            },
        )
        try:
            for _ in range(2):
                nodes.add_node(num_cpus=1)
            nodes.wait_for_nodes()
            ray.init(address=nodes.address, configure_logging=False, log_to_driver=False)
            yield nodes
        finally:
            ray.shutdown()
            nodes.shutdown()


@pytest.fixture
def placement(cluster: Cluster) -> RayPlacement:
    """Two worker actors of one CPU each: one per node."""
    return RayPlacement(workers=2, worker_cpus=1, orphan_timeout=5.0)


def worker_nodes(cluster: Cluster) -> list[Any]:
    """The cluster's nodes other than the head, live ones."""
    return [n for n in cluster.worker_nodes if n.remaining_processes_alive()]

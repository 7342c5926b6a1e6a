"""One real local Ray for these tests (2 CPUs), and one placement on it.

Ray starts in a few seconds (its dashboard too: the tests read Ray's state API)
and each worker actor is a Python process that imports deepactors: both are
paid once for the package, and every test places its children on the same two
workers (each test's parent is a new link, on its own event loop). Ray stops
when the package's last test ends, not holding its memory and CPU through the
rest of the suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from deepactors.placement import RayPlacement  # noqa: E402

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[None]:
    """A local Ray with 2 CPUs (its dashboard on: the tests read Ray's state API)."""
    # Workers have the driver's working directory on their path: tests import
    # as a package from the checkout's root (tests.placement.agents), as here.
    assert Path.cwd() == ROOT, "run the placement tests from the checkout's root"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_DISABLE_USAGE_STATS", "1")
        # "local": a Ray of its own, never a cluster another test (placement_nodes) started.
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=True,
            configure_logging=False,
            log_to_driver=False,
        )
        try:
            yield
        finally:
            ray.shutdown()


@pytest.fixture(scope="package")
def placement(ray_cluster: None) -> RayPlacement:
    """Two worker actors for every test here (half a CPU each: the other CPU is
    for the placements of tests that make their own)."""
    return RayPlacement(workers=2, worker_cpus=0.5, orphan_timeout=5.0)

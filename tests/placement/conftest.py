"""One real local Ray for the whole test session (2 CPUs), and one placement on it.

Ray starts in a few seconds and each worker actor is a Python process that
imports deepactors: both are paid once per session, and every test places its
children on the same two workers (each test's parent is a new link, on its own
event loop).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from deepactors.placement import RayPlacement  # noqa: E402

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A local Ray with 2 CPUs (its dashboard on: the tests read Ray's state API)."""
    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    # Workers have the driver's working directory on their path: tests import
    # as a package from the checkout's root (tests.placement.agents), as here.
    assert Path.cwd() == ROOT, "run the placement tests from the checkout's root"
    ray.init(num_cpus=2, include_dashboard=True, configure_logging=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def placement(ray_cluster: None) -> RayPlacement:
    """Two worker actors for every test of the session (half a CPU each: the
    other CPU is for the placements of tests that make their own)."""
    return RayPlacement(workers=2, worker_cpus=0.5, orphan_timeout=5.0)

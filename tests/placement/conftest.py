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
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=False,
        # The workers import this checkout (tests.placement.agents among it).
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def placement(ray_cluster: None) -> RayPlacement:
    """Two worker actors, one per CPU, for every test of the session."""
    return RayPlacement(workers=2, orphan_timeout=5.0)

"""Fixtures: every checkpointer and store under test, on real SQLite files.

Every test here also runs under blockbuster, scanning ``deepactors``: a blocking
call (SQLite, file I/O) made on the event-loop thread fails the test. Its probe
for "is a loop running here" is widened to trio, as in ``tests/backends``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deepactors.persistence import (
    Checkpointer,
    MemoryCheckpointer,
    MemoryStore,
    SqliteCheckpointer,
    SqliteStore,
    Store,
)


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""


@pytest.fixture(params=["memory", "sqlite"])
async def checkpointer(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Checkpointer]:
    cp: Checkpointer
    if request.param == "memory":
        cp = MemoryCheckpointer()
    else:
        cp = SqliteCheckpointer(tmp_path / "nested" / "checkpoints.db")
    async with cp:
        yield cp


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    async with SqliteStore(tmp_path / "store.db") as sqlite_store:
        yield sqlite_store

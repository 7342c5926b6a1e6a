"""Fixtures: every checkpointer and store under test, on real SQLite files.

Every test here also runs under blockbuster, scanning ``deepactors``: a blocking
call (SQLite, file I/O) made on the event-loop thread fails the test. Its probe
for "is a loop running here" is widened to trio, as in ``tests/backends``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import blockbuster.blockbuster as bb_module
import pytest
import trio
from blockbuster import blockbuster_ctx

from deepactors.persistence import (
    Checkpointer,
    MemoryCheckpointer,
    MemoryStore,
    SqliteCheckpointer,
    SqliteStore,
    Store,
)


class _LoopProbe:
    @staticmethod
    def get_running_loop() -> object:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return trio.lowlevel.current_trio_token()  # RuntimeError outside trio's thread


@pytest.fixture(autouse=True)
def blocking_detector(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any test in which deepactors blocks the event loop."""
    monkeypatch.setattr(bb_module, "asyncio", _LoopProbe)
    with blockbuster_ctx(["deepactors"]):
        yield


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

"""What the tests of a served app whose PostgreSQL goes away share.

A PostgreSQL server of the importing module's own (``tests/pgserver.py``), so
that stopping it leaves the session's, which other tests use, alone; a fresh
database on it per test, the server started again after a test that stopped it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.pgserver import PostgresServer
from tests.waiting import wait_until_sync

__all__ = ["BOUND", "database", "own_server", "say", "until"]

BOUND = 60.0
"""Seconds anything here may take: generous, the machine is shared."""


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def database(own_server: PostgresServer) -> Iterator[tuple[PostgresServer, str]]:
    """This module's server, up, and a fresh database on it."""
    if not own_server.running:
        own_server.start()
    yield own_server, own_server.new_database()
    if not own_server.running:
        own_server.start()


def say(text: str) -> dict[str, Any]:
    """A run's input: one user message."""
    return {"messages": [{"role": "user", "content": text}]}


def until(check: Callable[[], bool], what: str) -> None:
    """Wait (up to :data:`BOUND`) until ``check()``; fail saying ``what`` if never."""
    wait_until_sync(check, what=what, timeout=BOUND, interval=0.1)

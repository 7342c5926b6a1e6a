"""Shared fixtures: every async test on asyncio AND trio, virtual time, a blocking-call detector.

Virtual time: mark a test (or a module, ``pytestmark = pytest.mark.virtual_time``)
with ``virtual_time`` and ``anyio_backend`` runs it on a virtual clock on both
loops: trio's ``MockClock(autojump_threshold=0)`` and, for asyncio, the
equivalent :class:`tests.vtime.VirtualClockLoop`. The clock stands still while
tasks run and jumps to the next deadline the moment every task waits, so
``anyio.sleep(3600)``, a model's simulated latency or a run's ``timeout=`` cost no
real time, and ``anyio.current_time()`` tells exactly how much time the code under
test let pass: assert on that (or on ordering, counts, a ``TimeoutError``), never
on wall time. Not for a test that waits on a thread, a subprocess or a server in
another thread under a deadline: the clock would jump past the deadline while the
other side works (``virtual_time(autojump_threshold=0.05)`` waits that long for
real before each jump, if a test needs a little of both); in a module marked
``virtual_time``, mark such a test ``real_time``, with a comment saying what it
waits on. anyio's ``wait_all_tasks_blocked`` polls every 0.1 s on asyncio, which
moves the virtual clock on: assert exact times only where nothing waits on it.
Compare loops with
``anyio_backend_name``, since the marked ``anyio_backend`` carries options.

Waiting for what another task, thread, process or server makes true: an event
where there is one; where there is none, ``tests/waiting.py``'s ``wait_until``
(async) or ``wait_until_sync`` (a thread), which poll with a bound and fail
naming what never happened. Never a sleep of a guessed length: it is too short
on a loaded machine and too long on a quiet one.

``blocking_detector`` runs a test under blockbuster, scanning the ``deepactors``
package: a blocking call (file or SQLite I/O, ``time.sleep``, a blocking lock...)
made on the event-loop thread with a ``deepactors`` frame on the stack fails the
test with ``BlockingError``. blockbuster only asks "is an asyncio loop running in
this thread?" (``asyncio.get_running_loop()``), never true under trio, so on trio
it would detect nothing; the fixture swaps the ``asyncio`` name inside
blockbuster's module for a probe that also answers yes on trio's event-loop
thread (trio's worker threads, like asyncio's, answer no). The canaries in
``tests/backends`` and ``tests/fs_tools`` prove it fires on both loops.
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Iterator
from typing import Any

import blockbuster.blockbuster as bb_module
import pytest
import trio
import trio.testing
from blockbuster import blockbuster_ctx

from tests.pgserver import PostgresServer
from tests.vtime import VirtualClockLoop


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--scope-seconds-out",
        metavar="PATH",
        help="write each unit of work's worker seconds to PATH as JSON (tests/scheduling.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", "no") != "no":
        # Only in an xdist run, where pytest-xdist is there to build on.
        from tests import scheduling

        scheduling.register(config)
    config.addinivalue_line(
        "markers",
        "virtual_time(autojump_threshold=0): run on a virtual clock on both loops "
        "(see tests/conftest.py)",
    )
    config.addinivalue_line(
        "markers", "real_time: stay on the real clock in a module marked virtual_time"
    )


# Explicit, so a missing trio fails the suite instead of silently skipping it.
@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    marker = request.node.get_closest_marker("virtual_time")
    if marker is None or request.node.get_closest_marker("real_time") is not None:
        return ("asyncio", {"debug": True}) if request.param == "asyncio" else "trio"
    threshold = float(marker.kwargs.get("autojump_threshold", 0.0))
    if request.param == "asyncio":
        factory = functools.partial(VirtualClockLoop, autojump_threshold=threshold)
        return ("asyncio", {"debug": True, "loop_factory": factory})
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=threshold)})


class _LoopProbe:
    """Stands in for :mod:`asyncio` inside blockbuster (see the module docstring)."""

    @staticmethod
    def get_running_loop() -> object:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return trio.lowlevel.current_trio_token()  # RuntimeError outside trio's thread


@pytest.fixture
def blocking_detector(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if deepactors blocks the event loop (see the module docstring)."""
    monkeypatch.setattr(bb_module, "asyncio", _LoopProbe)
    with blockbuster_ctx(["deepactors"]):
        yield


@pytest.fixture
def settled_heap() -> Iterator[None]:
    """Collect, then keep the test process's heap out of the collector for one test.

    For tests that bound how long the event loop may be held. By the time the
    suite reaches them the pytest process holds 500,000-700,000 objects from
    earlier tests, and one full collection of them took 0.3-1.3 s on the CI
    machine: landing inside such a test, it failed it for the runner's objects,
    not the code under test. Frozen objects are not scanned; what the test
    itself allocates is still collected as usual.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One private PostgreSQL server for the whole test session (tests/pgserver.py).

    Tests that share it keep apart by thread ids or by :func:`postgres_dsn`'s
    fresh database each.
    """
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server, for one test."""
    return postgres_server.new_database()

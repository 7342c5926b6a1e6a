"""Fixtures of the client tests: ``deepactors serve`` on each event loop."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .served import served_agent


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of ``deepactors serve`` serving the test agent, on asyncio or trio
    (``--loop``); one server for the tests of a module."""
    folder = tmp_path_factory.mktemp(f"serve-{request.param}")
    with served_agent(str(request.param), folder) as served:
        yield served


@pytest.fixture(params=["asyncio", "trio"])
def loop(request: pytest.FixtureRequest) -> str:
    """The event loop of a server a test starts itself (``--loop``)."""
    return str(request.param)

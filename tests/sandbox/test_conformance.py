"""The backend conformance suite of tests/backends, run over bubblewrap sandboxes.

Shared (one workspace) and per thread (the suite's calls made in one thread's
scope): the sandbox's files behave as every other backend's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deepactors.backends import BubblewrapSandbox, SandboxKey, sandbox_scope
from tests.backends import test_conformance as _suite
from tests.backends.conftest import Harness, _disk_raw

pytestmark = pytest.mark.anyio

KEY = SandboxKey("conformance", "tester")

# The suite's tests, collected here with this module's fixtures.
globals().update({name: getattr(_suite, name) for name in dir(_suite) if name.startswith("test_")})


@pytest.fixture(params=["shared", "per-thread"])
async def harness(request: pytest.FixtureRequest, sandbox_root: Path) -> AsyncIterator[Harness]:
    per_thread = request.param == "per-thread"
    async with BubblewrapSandbox(sandbox_root, per_thread=per_thread, timeout=20) as sandbox:
        folder = sandbox_root / KEY.slug if per_thread else sandbox_root
        with sandbox_scope(KEY):
            yield Harness(f"bwrap-{request.param}", sandbox, _disk_raw(folder))


@pytest.fixture
def backend(harness: Harness) -> BubblewrapSandbox:
    assert isinstance(harness.backend, BubblewrapSandbox)
    return harness.backend

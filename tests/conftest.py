"""Shared fixtures: every async test runs on asyncio AND trio."""

from __future__ import annotations

from typing import Any

import pytest


# Explicit, so a missing trio fails the suite instead of silently skipping it.
@pytest.fixture(
    params=[
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param

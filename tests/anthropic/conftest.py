"""Fixtures for the Anthropic adapter tests: a local Messages API and a model on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI

MODEL_ID = "claude-sonnet-5-5"


@pytest.fixture
def api() -> Iterator[FakeAnthropicAPI]:
    """A fresh fake API server for one test."""
    with FakeAnthropicAPI() as server:
        yield server


@pytest.fixture
async def model(api: FakeAnthropicAPI) -> AsyncIterator[AnthropicModel]:
    """An AnthropicModel talking to ``api`` (closed after the test)."""
    async with AnthropicModel(MODEL_ID, api_key="test-key", base_url=api.base_url) as m:
        yield m

"""Fixtures for the OpenAI adapter tests: a local OpenAI API, and which of its two APIs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.openai.fake_api import FakeOpenAI

MODEL_ID = "gpt-5.5"


@pytest.fixture
def api() -> Iterator[FakeOpenAI]:
    """A fresh fake server; the test fails if any request broke the SDK's request types."""
    with FakeOpenAI() as server:
        yield server
    assert server.invalid == []


@pytest.fixture(params=["chat", "responses"])
def api_kind(request: pytest.FixtureRequest) -> Any:
    """Chat Completions, then Responses."""
    return request.param

"""A model's stream, as the loop reads it when someone listens for its deltas.

``ChatModel.stream`` returns an async iterator: usually an async generator
(closed as soon as the answer is in), or an iterator of another kind, which has
nothing to close and must work as well.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from deepactors import AssistantMessage, create_deep_agent
from deepactors.events import ModelDelta
from deepactors.models import ModelRequest, StreamDelta, StreamPart

pytestmark = pytest.mark.anyio


class _Parts:
    """An async iterator that is not a generator (no ``aclose``)."""

    def __init__(self, parts: list[StreamPart]) -> None:
        self._parts = iter(parts)

    def __aiter__(self) -> _Parts:
        return self

    async def __anext__(self) -> StreamPart:
        try:
            return next(self._parts)
        except StopIteration:
            raise StopAsyncIteration from None


class IteratorModel:
    """Streams through a plain iterator object."""

    model_name = "iterator"

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content="hello there")

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        return _Parts(
            [
                StreamDelta(kind="text", text="hello "),
                StreamDelta(kind="text", text="there"),
                AssistantMessage(content="hello there"),
            ]
        )


async def test_deltas_reach_a_listener_from_a_stream_that_is_not_a_generator() -> None:
    seen = [e async for e in create_deep_agent(IteratorModel()).astream("hi")]
    assert [e.text for e in seen if isinstance(e, ModelDelta)] == ["hello ", "there"]
    assert type(seen[-1]).__name__ == "RunFinished"

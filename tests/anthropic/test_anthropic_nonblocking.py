"""AnthropicModel never blocks the event loop (checked by blockbuster, on both loops)."""

from __future__ import annotations

import pytest

from deepactors.messages import AssistantMessage, UserMessage
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.conftest import MODEL_ID
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text, tool_use

pytestmark = pytest.mark.anyio


async def test_first_and_later_calls_do_not_block_the_loop(
    api: FakeAnthropicAPI, blocking_detector: None
) -> None:
    api.reply(*(message(text("hi"), tool_use("f", {"a": 1})) for _ in range(3)))
    request = ModelRequest(messages=[UserMessage(content="q")])
    # Made inside the detector: the first call builds the client (credentials, TLS).
    async with AnthropicModel(MODEL_ID, api_key="k", base_url=api.base_url) as model:
        await model.generate(request)
        await model.generate(request)
        parts = [p async for p in model.stream(request)]
    final = parts[-1]
    assert isinstance(final, AssistantMessage)
    assert final.tool_calls[0].args == {"a": 1}

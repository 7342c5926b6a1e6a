"""Stop reasons: a full context window is an error; refusal and pause_turn stay visible."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deepactors.errors import ContextWindowExceeded
from deepactors.messages import AssistantMessage, UserMessage
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[UserMessage(content="hi")])


async def answer(model: AnthropicModel, streaming: bool) -> AssistantMessage:
    with anyio.fail_after(5):
        if not streaming:
            return await model.generate(REQUEST)
        parts: list[Any] = [part async for part in model.stream(REQUEST)]
        assert isinstance(parts[-1], AssistantMessage)
        return parts[-1]


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
async def test_model_context_window_exceeded_raises(
    api: FakeAnthropicAPI, model: AnthropicModel, streaming: bool
) -> None:
    api.reply(message(text("cut sh"), stop_reason="model_context_window_exceeded"))
    with pytest.raises(ContextWindowExceeded, match="context window"):
        await answer(model, streaming)
    assert model.limiter.statistics().in_flight == 0


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("reason", ["refusal", "pause_turn"])
async def test_refusal_and_pause_turn_stay_on_the_message(
    api: FakeAnthropicAPI, model: AnthropicModel, streaming: bool, reason: str
) -> None:
    api.reply(message(text("no"), stop_reason=reason))
    assert (await answer(model, streaming)).stop_reason == reason

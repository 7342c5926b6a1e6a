"""generate() streams whenever the SDK would refuse a plain request as too long."""

from __future__ import annotations

import anthropic
import anyio
import pytest

from deepactors.messages import UserMessage
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text

pytestmark = pytest.mark.anyio


def ask(max_tokens: int) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content="hi")], settings={"max_tokens": max_tokens})


async def test_generate_with_a_user_client_and_large_max_tokens_streams(
    api: FakeAnthropicAPI,
) -> None:
    api.reply(message(text("long")))
    async with anthropic.AsyncAnthropic(base_url=api.base_url, api_key="k", max_retries=0) as c:
        model = AnthropicModel("claude-sonnet-5-5", client=c, max_tokens=64_000)
        with anyio.fail_after(5):
            answer = await model.generate(ask(64_000))
    assert answer.text == "long"
    assert api.requests[0].body["stream"] is True


async def test_generate_with_a_user_client_that_sets_a_timeout_stays_plain(
    api: FakeAnthropicAPI,
) -> None:
    api.reply(message(text("plain")))
    async with anthropic.AsyncAnthropic(
        base_url=api.base_url, api_key="k", max_retries=0, timeout=30
    ) as c:
        model = AnthropicModel("claude-sonnet-5-5", client=c)
        with anyio.fail_after(5):
            answer = await model.generate(ask(64_000))
    assert answer.text == "plain"
    assert api.requests[0].body["stream"] is False


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
async def test_generate_streams_for_a_model_with_a_lower_plain_limit(
    api: FakeAnthropicAPI,
) -> None:
    # The SDK knows models whose plain requests are refused far below ~21k tokens.
    api.reply(message(text("opus")))
    async with AnthropicModel("claude-opus-4-0", api_key="k", base_url=api.base_url) as model:
        with anyio.fail_after(5):
            answer = await model.generate(ask(10_000))
    assert answer.text == "opus"
    assert api.requests[0].body["stream"] is True
    assert model.limiter.statistics().in_flight == 0

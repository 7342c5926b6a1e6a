"""Transport failures (resets, read timeouts, short bodies) become retryable errors."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deepactors.errors import ModelConnectionError
from deepactors.messages import AssistantMessage, UserMessage
from deepactors.middleware._retry import ModelRetryMiddleware
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.raw_server import Behaviour, RawServer

pytestmark = [
    pytest.mark.anyio,
    # A stream abandoned midway leaves the SDK's chain of async generators to the
    # garbage collector on trio, which warns about each one.
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
]

REQUEST = ModelRequest(messages=[UserMessage(content="hi")])


async def consume(model: AnthropicModel, request: ModelRequest) -> AssistantMessage:
    async for part in model.stream(request):
        if isinstance(part, AssistantMessage):
            return part
    raise AssertionError("the stream ended without a message")


@pytest.mark.parametrize(
    "behaviour", ["reset_mid_stream", "stall_mid_stream", "reset_before_answer"]
)
async def test_stream_broken_off_raises_a_connection_error_and_frees_its_slot(
    behaviour: Behaviour,
) -> None:
    with RawServer(behaviour) as server:
        async with AnthropicModel(
            "claude-raw", api_key="k", base_url=server.base_url, timeout=0.3
        ) as model:
            with anyio.fail_after(5), pytest.raises(ModelConnectionError) as info:
                await consume(model, REQUEST)
            assert model.limiter.statistics().in_flight == 0
    assert "Anthropic API" in str(info.value)


@pytest.mark.parametrize("behaviour", ["short_body", "reset_before_answer"])
async def test_plain_answer_broken_off_raises_a_connection_error(behaviour: Behaviour) -> None:
    with RawServer(behaviour) as server:
        async with AnthropicModel("claude-raw", api_key="k", base_url=server.base_url) as model:
            with anyio.fail_after(5), pytest.raises(ModelConnectionError):
                await model.generate(REQUEST)
            assert model.limiter.statistics().in_flight == 0


async def test_retry_middleware_retries_a_stream_cut_midway() -> None:
    with RawServer("reset_mid_stream") as server:
        async with AnthropicModel("claude-raw", api_key="k", base_url=server.base_url) as model:

            async def handler(request: ModelRequest) -> Any:
                return await consume(model, request)

            mw = ModelRetryMiddleware(max_attempts=3, initial_delay=0.001, jitter=False)
            with anyio.fail_after(5), pytest.raises(ModelConnectionError):
                await mw.wrap_model_call(REQUEST, handler)
        assert server.connections == 3

"""OpenAIModel over the real openai SDK against a local HTTP server, both APIs."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from deepactors.errors import (
    ConfigurationError,
    ContextWindowExceeded,
    ModelAPIError,
    ModelConnectionError,
    OverloadedError,
    RateLimitError,
)
from deepactors.messages import (
    AssistantMessage,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from deepactors.models import STRUCTURED_OUTPUT, ModelRequest, StreamDelta
from deepactors.models.openai import OpenAIModel
from deepactors.models.profiles import profile_for
from tests.openai.conftest import MODEL_ID
from tests.openai.fake_api import FakeOpenAI, answer, call, error

pytestmark = pytest.mark.anyio


@pytest.fixture
async def model(api: FakeOpenAI, api_kind: Any) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(MODEL_ID, api=api_kind, api_key="k", base_url=api.base_url) as m:
        yield m


def ask(*messages: Any, **kw: Any) -> ModelRequest:
    return ModelRequest(messages=list(messages), system_prompt="Be brief.", **kw)


async def collect(model: OpenAIModel, request: ModelRequest) -> tuple[list[StreamDelta], Any]:
    deltas: list[StreamDelta] = []
    final = None
    async for part in model.stream(request):
        if isinstance(part, StreamDelta):
            deltas.append(part)
        else:
            final = part
    return deltas, final


async def test_parallel_tool_calls_usage_and_cost_plain_and_streamed(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    reply = answer(
        "Looking.",
        calls=[call("search", {"q": "paris"}), call("search", {"q": "oslo"})],
        usage={"input": 800, "cached": 200, "output": 40},
    )
    api.reply(reply, reply)
    plain = await model.generate(ask(UserMessage(content="weather?")))
    deltas, streamed = await collect(model, ask(UserMessage(content="weather?")))
    prices = profile_for(MODEL_ID).prices  # type: ignore[union-attr]
    assert prices is not None
    for message in (plain, streamed):
        assert message.text == "Looking."
        assert [(c.name, c.args) for c in message.tool_calls] == [
            ("search", {"q": "paris"}),
            ("search", {"q": "oslo"}),
        ]
        assert message.stop_reason == "tool_use"
        usage = message.usage
        assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (800, 200, 40)
        assert usage.cost_usd == pytest.approx(
            (800 * prices.input + 200 * prices.cached_input + 40 * prices.output) / 1e6  # type: ignore[operator]
        )
    assert "".join(d.text for d in deltas if d.kind == "text") == "Looking."
    assert "".join(d.text for d in deltas if d.kind == "tool_input") == (
        '{"q": "paris"}{"q": "oslo"}'
    )
    body = api.requests[0].body
    if model.api == "chat":
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert body["max_completion_tokens"] == model.max_tokens
        assert api.requests[1].body["stream_options"] == {"include_usage": True}
    else:
        assert body["instructions"] == "Be brief."
        assert body["store"] is False
        assert body["include"] == ["reasoning.encrypted_content"]


async def test_tool_results_and_images_go_back_in_the_apis_shapes(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    api.reply(answer("done"))
    image = ImageBlock(source={"type": "base64", "media_type": "image/png", "data": "AAAA"})
    calls = [ToolCall(id="c1", name="look", args={"x": 1}), ToolCall(id="c2", name="look")]
    await model.generate(
        ask(
            UserMessage(content=[TextBlock(text="what is this?"), image]),
            AssistantMessage(content="", tool_calls=calls),
            ToolMessage(tool_call_id="c1", name="look", content="a cat"),
            ToolMessage(tool_call_id="c2", name="look", content="boom", status="error"),
        )
    )
    body = api.requests[0].body
    if model.api == "chat":
        user, assistant, r1, r2 = body["messages"][1:]
        assert user["content"][1] == {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,AAAA"},
        }
        assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
        assert (r1["tool_call_id"], r1["content"]) == ("c1", "a cat")
        assert (r2["tool_call_id"], r2["content"]) == ("c2", "Error: boom")
    else:
        user, c1, _c2, r1, r2 = body["input"]
        assert user["content"][1]["image_url"] == "data:image/png;base64,AAAA"
        assert (c1["type"], c1["call_id"], c1["arguments"]) == ("function_call", "c1", '{"x": 1}')
        assert (r1["call_id"], r1["output"]) == ("c1", "a cat")
        assert r2["output"] == "Error: boom"


async def test_reasoning_items_are_kept_across_turns(api: FakeOpenAI) -> None:
    async with OpenAIModel(
        MODEL_ID, api="responses", api_key="k", base_url=api.base_url, reasoning_effort="high"
    ) as model:
        api.reply(answer("", calls=[call("look", {})], reasoning="I should look."), answer("ok"))
        deltas, first = await collect(model, ask(UserMessage(content="go")))
        assert [d.text for d in deltas if d.kind == "thinking"] == [
            "I s",
            "hou",
            "ld ",
            "loo",
            "k.",
        ]
        (thinking,) = [b for b in first.content if isinstance(b, ThinkingBlock)]
        assert thinking.thinking == "I should look."
        call_id = first.tool_calls[0].id
        await model.generate(
            ask(
                UserMessage(content="go"),
                first,
                ToolMessage(tool_call_id=call_id, name="look", content="seen"),
            )
        )
    sent = api.requests[1].body
    assert sent["reasoning"] == {"effort": "high"}
    reasoning, fc, output = sent["input"][1:]
    assert reasoning["type"] == "reasoning"
    assert reasoning["encrypted_content"] == "enc:I should look."
    assert reasoning["summary"] == [{"type": "summary_text", "text": "I should look."}]
    assert (fc["call_id"], output["call_id"]) == (call_id, call_id)


async def test_native_structured_output_sends_a_strict_json_schema(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city"],
    }
    api.reply(answer('{"city": "Oslo", "celsius": 3}'))
    message = await model.generate(
        ask(UserMessage(content="w"), settings={STRUCTURED_OUTPUT: schema})
    )
    assert message.text == '{"city": "Oslo", "celsius": 3}'
    assert model.native_structured_output
    body = api.requests[0].body
    fmt = body["response_format"]["json_schema"] if model.api == "chat" else body["text"]["format"]
    assert fmt["strict"] is True
    assert fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["required"] == ["city", "celsius"]
    assert schema["required"] == ["city"]  # the caller's schema is not changed


@pytest.mark.parametrize(
    ("reply", "kind", "retry_after"),
    [
        (error(429, "rate_limit_exceeded", "slow down", retry_after=1.5), RateLimitError, 1.5),
        (error(429, "insufficient_quota", "no credit"), ModelAPIError, None),
        (error(503, "", "overloaded", retry_after=2), OverloadedError, 2.0),
        (
            error(400, "context_length_exceeded", "maximum context length is 8192 tokens"),
            ContextWindowExceeded,
            None,
        ),
        (
            error(400, "", "This model's maximum context length is 4096 tokens"),
            ContextWindowExceeded,
            None,
        ),
        (error(400, "invalid_value", "bad temperature"), ModelAPIError, None),
    ],
)
async def test_errors_map_onto_the_deepactors_tree(
    api: FakeOpenAI, model: OpenAIModel, reply: Any, kind: type[Exception], retry_after: Any
) -> None:
    api.reply(reply, reply)
    for attempt in (model.generate, lambda r: collect(model, r)):
        with pytest.raises(kind) as info:
            await attempt(ask(UserMessage(content="x")))
        assert type(info.value) is kind
        assert getattr(info.value, "retry_after", None) == retry_after
        assert model.limiter.statistics().in_flight == 0


async def test_a_refused_connection_is_a_connection_error(api_kind: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with OpenAIModel(
        MODEL_ID, api=api_kind, api_key="k", base_url=f"http://127.0.0.1:{port}/v1"
    ) as model:
        with pytest.raises(ModelConnectionError, match="connection to the OpenAI API failed"):
            await model.generate(ask(UserMessage(content="x")))


async def test_a_compatible_server_that_omits_usage_ids_and_finish_reason(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    args = {"path": "/notes/ünïcode.md", "content": 'line 1\nline "2"', "n": [1, 2]}
    reply = answer("ok", calls=[call("write", args), call("write", {"path": "/b"})], compat=True)
    api.reply(reply, reply)
    deltas, streamed = await collect(model, ask(UserMessage(content="x")))
    plain = await model.generate(ask(UserMessage(content="x")))
    for message in (streamed, plain):
        assert [c.args for c in message.tool_calls] == [args, {"path": "/b"}]
        assert all(c.id and c.error is None for c in message.tool_calls)
        assert len({c.id for c in message.tool_calls}) == 2
        assert message.usage is None
        assert message.stop_reason == "tool_use"
    if model.api == "chat":
        assert all(len(d.text) == 1 for d in deltas if d.kind == "tool_input")


async def test_missing_api_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIModel(MODEL_ID)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        await model.generate(ask(UserMessage(content="x")))


# A stream left midway leaves the SDK's and httpx2's own nested async generators
# (SSEDecoder.aiter_bytes, Response.aiter_bytes, PoolByteStream.__aiter__) to the
# garbage collector, which trio reports; ours are closed (aclosing). Not ours to fix.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_cancelling_a_stream_midway_frees_the_slot(
    api: FakeOpenAI, model: OpenAIModel
) -> None:
    api.reply(answer("x" * 300, chunk=1))
    parts = model.stream(ask(UserMessage(content="x")))
    async for _ in parts:
        break
    await parts.aclose()  # type: ignore[attr-defined]
    assert model.limiter.statistics().in_flight == 0
    with anyio.fail_after(5):
        api.reply(answer("again"))
        assert (await model.generate(ask(UserMessage(content="x")))).text == "again"

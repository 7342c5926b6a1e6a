"""AnthropicModel over the real SDK and real HTTP, against the local fake API."""

from __future__ import annotations

import email.utils
import gc
import time
from contextlib import aclosing
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
    RedactedThinkingBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from deepactors.models import ModelRequest, StreamDelta
from deepactors.models._anthropic_errors import parse_retry_after
from deepactors.models.anthropic import DEFAULT_MODEL, AnthropicModel
from deepactors.models.profiles import profile_for
from deepactors.tools import tool
from tests.anthropic.conftest import MODEL_ID
from tests.anthropic.fake_api import (
    FakeAnthropicAPI,
    error,
    message,
    redacted_thinking,
    text,
    thinking,
    tool_use,
)

pytestmark = pytest.mark.anyio


def assert_priced(usage: Usage | None, expected: Usage) -> None:
    """``usage`` has the expected counts, and their cost at the model's prices."""
    assert usage is not None
    assert usage.model_copy(update={"cost_usd": None}) == expected
    profile = profile_for(MODEL_ID)
    assert profile is not None
    assert usage.cost_usd == pytest.approx(profile.cost(expected))


# On trio, a stream abandoned midway (an error event, a cancellation) leaves the SDK's
# and httpx's chain of async generators to the garbage collector, and trio warns about
# each one. The response itself is closed; the warnings are about the generators.
abandons_stream = pytest.mark.filterwarnings(
    "ignore:Async generator .* was garbage collected:ResourceWarning"
)


@tool
def search(query: str, limit: int = 5) -> str:
    """Search the web.

    Args:
        query: What to look for.
        limit: How many results.
    """
    return query


def ask(*messages: Any, **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=list(messages) or [UserMessage(content="hi")], **kwargs)


async def collect(model: AnthropicModel, request: ModelRequest) -> list[Any]:
    with anyio.fail_after(5):
        return [part async for part in model.stream(request)]


# -- requests ------------------------------------------------------------------------


async def test_request_body_carries_converted_conversation_and_tools(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(message(text("done")))
    history = [
        SystemMessage(content="Late instructions."),
        UserMessage(
            content=[
                TextBlock(text="Look at this"),
                ImageBlock(source={"type": "base64", "media_type": "image/png", "data": "AAA"}),
            ]
        ),
        AssistantMessage(
            content=[
                ThinkingBlock(thinking="two searches", signature="sig-a"),
                RedactedThinkingBlock(data="opaque"),
                TextBlock(text="Searching."),
            ],
            tool_calls=[
                ToolCall(id="toolu_a", name="search", args={"query": "x"}),
                ToolCall(id="toolu_b", name="search", args={"query": "y"}),
            ],
        ),
        ToolMessage(tool_call_id="toolu_a", name="search", content="found x"),
        ToolMessage(tool_call_id="toolu_b", name="search", content="boom", status="error"),
        UserMessage(content="And now?"),
    ]
    await model.generate(ask(*history, system_prompt="Be brief.", tools=[search]))

    body = api.requests[0].body
    assert body["model"] == MODEL_ID
    assert body["stream"] is False
    assert body["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Late instructions."},
    ]
    assert body["tools"] == [
        {
            "name": "search",
            "description": search.description,
            "input_schema": search.parameters,
        }
    ]
    assert body["tools"][0]["input_schema"]["required"] == ["query"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "two searches", "signature": "sig-a"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {"query": "x"}},
                {"type": "tool_use", "id": "toolu_b", "name": "search", "input": {"query": "y"}},
            ],
        },
        {
            # Both results of the parallel calls and the next user text: one turn,
            # tool results first.
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "found x"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "text", "text": "And now?"},
            ],
        },
    ]


def test_tool_results_may_carry_text_and_images() -> None:
    image = ImageBlock(source={"type": "url", "url": "https://example.com/a.png"})
    history = [
        UserMessage(content="Take a screenshot."),
        AssistantMessage(tool_calls=[ToolCall(id="toolu_shot", name="screenshot")]),
        ToolMessage(
            tool_call_id="toolu_shot",
            name="screenshot",
            content=[TextBlock(text="here it is"), image],
        ),
        ToolMessage(tool_call_id="toolu_none", name="noop", content=""),
    ]
    body = AnthropicModel(MODEL_ID, api_key="k").build_body(ask(*history))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_shot", "name": "screenshot", "input": {}}],
    }
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_shot",
            "content": [
                {"type": "text", "text": "here it is"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ],
        },
        {"type": "tool_result", "tool_use_id": "toolu_none"},
    ]


async def test_settings_and_request_options_reach_the_body(api: FakeAnthropicAPI) -> None:
    api.reply(message(text("a")), message(text("b")))
    thinking_cfg = {"type": "enabled", "budget_tokens": 2048}
    async with AnthropicModel(
        MODEL_ID,
        api_key="k",
        base_url=api.base_url,
        max_tokens=1000,
        temperature=0.2,
        thinking=thinking_cfg,
        extra_headers={"x-trace": "t1"},
    ) as model:
        await model.generate(ask())
        await model.generate(
            ask(
                settings={
                    "max_tokens": 50,
                    "temperature": 0.9,
                    "stop_sequences": ["END"],
                    "anthropic_options": {"top_k": 3},
                    "some_other_models_flag": True,
                }
            )
        )
    first, second = (r.body for r in api.requests)
    assert (first["max_tokens"], first["temperature"], first["thinking"]) == (
        1000,
        0.2,
        thinking_cfg,
    )
    assert api.requests[0].headers["x-trace"] == "t1"
    assert second["max_tokens"] == 50
    assert second["temperature"] == 0.9
    assert second["stop_sequences"] == ["END"]
    assert second["top_k"] == 3
    assert "some_other_models_flag" not in second


async def test_generate_streams_when_max_tokens_is_too_large_for_a_plain_call(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(message(text("a long essay")))
    answer = await model.generate(ask(settings={"max_tokens": 64_000}))
    assert answer.text == "a long essay"
    assert api.requests[0].body["stream"] is True
    assert api.requests[0].body["max_tokens"] == 64_000


# -- answers -------------------------------------------------------------------------


async def test_answer_maps_content_tool_calls_stop_reason_and_usage(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(
        message(
            thinking("I should search twice", "sig-9"),
            redacted_thinking("xyz"),
            text("Let me look."),
            tool_use("search", {"query": "a"}, id="toolu_1"),
            tool_use("search", {"query": "b", "limit": 2}, id="toolu_2"),
            usage={
                "input_tokens": 120,
                "output_tokens": 30,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 200,
            },
        )
    )
    answer = await model.generate(ask(tools=[search]))
    assert answer.content == [
        ThinkingBlock(thinking="I should search twice", signature="sig-9"),
        RedactedThinkingBlock(data="xyz"),
        TextBlock(text="Let me look."),
    ]
    assert answer.tool_calls == [
        ToolCall(id="toolu_1", name="search", args={"query": "a"}),
        ToolCall(id="toolu_2", name="search", args={"query": "b", "limit": 2}),
    ]
    assert answer.stop_reason == "tool_use"
    assert answer.model == MODEL_ID
    assert_priced(
        answer.usage,
        Usage(input_tokens=120, output_tokens=30, cache_read_tokens=1000, cache_write_tokens=200),
    )


async def test_plain_text_answer_is_a_string(api: FakeAnthropicAPI, model: AnthropicModel) -> None:
    api.reply(message(text("Paris."), stop_reason="max_tokens"))
    answer = await model.generate(ask())
    assert answer.content == "Paris."
    assert answer.tool_calls == []
    assert answer.stop_reason == "max_tokens"


async def test_tool_calls_and_thinking_round_trip_into_the_next_request(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    first_answer = message(
        thinking("plan", "sig-keep"),
        tool_use("search", {"query": "a"}, id="toolu_x"),
        tool_use("search", {"query": "b"}, id="toolu_y"),
    )
    api.reply(first_answer, message(text("final")))
    user = UserMessage(content="find a and b")
    answer = await model.generate(ask(user, tools=[search]))
    results = [
        ToolMessage(tool_call_id=call.id, name=call.name, content=f"result {call.args['query']}")
        for call in answer.tool_calls
    ]
    await model.generate(ask(user, answer, *results, tools=[search]))

    sent = api.requests[1].body["messages"]
    # The assistant turn goes back exactly as the API produced it.
    assert sent[1] == {"role": "assistant", "content": list(first_answer.content)}
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_x", "content": "result a"},
            {"type": "tool_result", "tool_use_id": "toolu_y", "content": "result b"},
        ],
    }


@pytest.mark.parametrize("bad_input", ["not an object", [1, 2], None])
async def test_non_object_tool_input_becomes_a_call_error(
    api: FakeAnthropicAPI, model: AnthropicModel, bad_input: Any
) -> None:
    api.reply(message(tool_use("search", bad_input, id="toolu_bad"), text("")))
    answer = await model.generate(ask(tools=[search]))
    (call,) = answer.tool_calls
    assert call.id == "toolu_bad"
    assert call.args == {}
    assert call.error is not None
    assert "JSON object" in call.error


# -- streaming -----------------------------------------------------------------------


async def test_stream_yields_deltas_in_order_then_the_message(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(
        message(
            thinking("let me think hard", "sig-s"),
            text("Searching for both."),
            tool_use("search", {"query": "alpha", "limit": 3}, id="toolu_s1"),
            tool_use("search", {"query": "beta"}, id="toolu_s2"),
            usage={"input_tokens": 50, "output_tokens": 42, "cache_read_input_tokens": 7},
            chunk=3,
        )
    )
    parts = await collect(model, ask(tools=[search]))
    assert api.requests[0].body["stream"] is True
    *deltas, final = parts
    assert all(isinstance(d, StreamDelta) for d in deltas)
    assert isinstance(final, AssistantMessage)

    kinds = [(d.kind, d.index) for d in deltas]
    # Block by block, in the order the API sent them; no block interleaves.
    assert kinds == sorted(kinds, key=lambda k: k[1])
    by_block: dict[int, str] = {}
    for d in deltas:
        by_block[d.index] = by_block.get(d.index, "") + d.text
    assert by_block == {
        0: "let me think hard",
        1: "Searching for both.",
        2: '{"query": "alpha", "limit": 3}',
        3: '{"query": "beta"}',
    }
    assert {d.kind for d in deltas if d.index == 0} == {"thinking"}
    assert {d.kind for d in deltas if d.index == 1} == {"text"}
    assert {d.kind for d in deltas if d.index >= 2} == {"tool_input"}

    assert final.content == [
        ThinkingBlock(thinking="let me think hard", signature="sig-s"),
        TextBlock(text="Searching for both."),
    ]
    assert final.tool_calls == [
        ToolCall(id="toolu_s1", name="search", args={"query": "alpha", "limit": 3}),
        ToolCall(id="toolu_s2", name="search", args={"query": "beta"}),
    ]
    assert final.stop_reason == "tool_use"
    # Input and cache counts from message_start survive; output comes from message_delta.
    assert_priced(final.usage, Usage(input_tokens=50, output_tokens=42, cache_read_tokens=7))


async def test_streamed_malformed_tool_json_becomes_a_call_error(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(
        message(
            tool_use("search", {}, id="toolu_cut"),
            tool_use("search", {"query": "ok"}, id="toolu_ok"),
            raw_tool_json={0: '{"query": "unterminated'},
            stop_reason="max_tokens",
        )
    )
    *_, final = await collect(model, ask(tools=[search]))
    cut, ok = final.tool_calls
    assert cut.error is not None
    assert "not valid JSON" in cut.error
    assert cut.args == {}
    assert ok == ToolCall(id="toolu_ok", name="search", args={"query": "ok"})


async def test_stream_and_generate_agree(api: FakeAnthropicAPI, model: AnthropicModel) -> None:
    reply = message(text("same answer"), tool_use("search", {"query": "q"}, id="toolu_same"))
    api.reply(reply, reply)
    plain = await model.generate(ask())
    *_, streamed = await collect(model, ask())
    assert plain.model_dump(exclude={"id"}) == streamed.model_dump(exclude={"id"})


@abandons_stream
async def test_error_event_inside_a_stream_is_retryable(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(
        message(
            text("partial answer"),
            stream_error={"type": "overloaded_error", "message": "Overloaded"},
        )
    )
    with pytest.raises(OverloadedError, match="Overloaded"):
        await collect(model, ask())
    assert model.limiter.statistics().in_flight == 0
    gc.collect()  # the abandoned generators go now, while the filter is on


@abandons_stream
async def test_cancelling_a_stream_midway_frees_its_request_slot(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(message(text("a long answer " * 20), event_delay=0.01))
    received: list[Any] = []
    with anyio.fail_after(10), anyio.CancelScope() as scope:
        async with aclosing(model.stream(ask())) as parts:
            async for part in parts:
                received.append(part)
                if len(received) == 2:
                    # Cancelled while waiting for the next event from the server.
                    scope.cancel()
    assert scope.cancelled_caught
    assert len(received) == 2
    assert all(isinstance(p, StreamDelta) for p in received)
    assert model.limiter.statistics().in_flight == 0
    gc.collect()


# -- errors --------------------------------------------------------------------------


async def test_rate_limit_carries_retry_after(api: FakeAnthropicAPI, model: AnthropicModel) -> None:
    api.reply(error(429, "rate_limit_error", "Number of requests has exceeded", retry_after=2.5))
    with pytest.raises(RateLimitError) as caught:
        await model.generate(ask())
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 2.5
    assert "exceeded" in str(caught.value)
    # The SDK's own retries are off: the middleware decides.
    assert len(api.requests) == 1


async def test_stream_rate_limit_is_mapped_too(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(error(429, "rate_limit_error", "slow down", retry_after=1))
    with pytest.raises(RateLimitError) as caught:
        await collect(model, ask())
    assert caught.value.retry_after == 1.0


@pytest.mark.parametrize(
    ("status", "kind"), [(529, "overloaded_error"), (500, "api_error"), (503, "api_error")]
)
async def test_overload_and_server_errors_are_retryable(
    api: FakeAnthropicAPI, model: AnthropicModel, status: int, kind: str
) -> None:
    api.reply(error(status, kind, "Overloaded", retry_after=3))
    with pytest.raises(OverloadedError) as caught:
        await model.generate(ask())
    assert caught.value.status_code == status
    assert caught.value.retry_after == 3.0


async def test_bad_request_names_the_cause(api: FakeAnthropicAPI, model: AnthropicModel) -> None:
    api.reply(error(400, "invalid_request_error", "tools.0.name: String should match pattern"))
    with pytest.raises(ModelAPIError) as caught:
        await model.generate(ask())
    exc = caught.value
    assert type(exc) is ModelAPIError
    assert exc.status_code == 400
    assert "tools.0.name: String should match pattern" in str(exc)
    assert "invalid_request_error" in str(exc)


@pytest.mark.parametrize(
    "api_message",
    [
        "prompt is too long: 215000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 198000 + 16384 > 200000",
    ],
)
async def test_context_overflow_is_its_own_error(
    api: FakeAnthropicAPI, model: AnthropicModel, api_message: str
) -> None:
    api.reply(error(400, "invalid_request_error", api_message))
    with pytest.raises(ContextWindowExceeded, match="context window"):
        await model.generate(ask())


async def test_authentication_failure_is_not_retryable(
    api: FakeAnthropicAPI, model: AnthropicModel
) -> None:
    api.reply(error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(ModelAPIError, match="invalid x-api-key") as caught:
        await model.generate(ask())
    assert not isinstance(caught.value, RateLimitError | OverloadedError)


async def test_unreachable_server_is_retryable() -> None:
    with FakeAnthropicAPI() as api:
        url = api.base_url
    async with AnthropicModel(MODEL_ID, api_key="k", base_url=url) as model:
        with pytest.raises(ModelConnectionError, match="connection"):
            await model.generate(ask())


async def test_missing_api_key_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
    ):
        monkeypatch.delenv(var, raising=False)
    # No profile on disk either.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    model = AnthropicModel(base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        await model.generate(ask())


async def test_broken_credentials_config_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))  # set, but holds no profile
    model = AnthropicModel(base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="credentials"):
        await model.generate(ask())


# -- lifetime ------------------------------------------------------------------------


def test_default_model_is_a_current_sdk_model() -> None:
    from typing import get_args

    from anthropic.resources.messages.messages import DEPRECATED_MODELS
    from anthropic.types import Model

    known = get_args(get_args(Model)[0])
    assert DEFAULT_MODEL in known
    assert DEFAULT_MODEL not in DEPRECATED_MODELS
    assert AnthropicModel().model_name == DEFAULT_MODEL


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_one_model_serves_successive_event_loops(api: FakeAnthropicAPI, backend: str) -> None:
    """The sync wrappers start a new loop per call; the model makes a client per loop."""
    model = AnthropicModel(MODEL_ID, api_key="k", base_url=api.base_url)
    api.reply(message(text("one")), message(text("two")))

    async def once() -> str:
        async with model:
            return (await model.generate(ask())).text

    assert anyio.run(once, backend=backend) == "one"
    assert anyio.run(once, backend=backend) == "two"


async def test_user_supplied_client_is_used_and_left_open(api: FakeAnthropicAPI) -> None:
    import anthropic

    api.reply(message(text("via my client")))
    async with anthropic.AsyncAnthropic(
        api_key="k", base_url=api.base_url, max_retries=0
    ) as client:
        model = AnthropicModel(MODEL_ID, client=client)
        assert (await model.generate(ask())).text == "via my client"
        await model.aclose()
        assert not client.is_closed()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = parse_retry_after({"retry-after": when})
    assert seconds is not None
    assert 25 <= seconds <= 31


def test_retry_after_as_an_http_date_in_an_unknown_zone_is_utc() -> None:
    # "-0000" (zone unknown) must read as UTC whatever the local zone is: the
    # process here may run in any TZ, so compare against a UTC date explicitly.
    when = email.utils.formatdate(time.time() + 30, localtime=False)  # "... -0000"
    assert when.endswith("-0000")
    seconds = parse_retry_after({"retry-after": when})
    assert seconds is not None
    assert 25 <= seconds <= 31

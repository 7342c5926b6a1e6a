"""TokenCounter: incremental counts equal a full recount; provider usage is the base when valid."""

from __future__ import annotations

from deepactors import AssistantMessage, ToolCall
from deepactors.messages import ImageBlock, ToolMessage, Usage, UserMessage
from deepactors.middleware import approximate_tokens
from deepactors.middleware._tokens import TokenCounter, message_tokens, text_tokens


def turn(i: int, usage: Usage | None = None) -> list[AssistantMessage | ToolMessage]:
    call = ToolCall(id=f"c{i}", name="fetch", args={"page": i})
    return [
        AssistantMessage(content=f"turn {i}", tool_calls=[call], usage=usage),
        ToolMessage(tool_call_id=f"c{i}", name="fetch", content="r" * 400),
    ]


def test_incremental_counts_equal_a_full_estimate() -> None:
    counter = TokenCounter()
    messages: list = [UserMessage(content="start")]
    for i in range(50):
        messages += turn(i)
        assert counter.count(messages, system_prompt="S" * 40) == approximate_tokens(
            messages, system_prompt="S" * 40
        )


def test_a_view_start_and_head_are_counted() -> None:
    messages: list = [UserMessage(content="start")]
    for i in range(10):
        messages += turn(i)
    counter = TokenCounter()
    assert counter.count(messages, start=5, head=100) == (approximate_tokens(messages[5:]) + 100)


def test_provider_usage_is_the_base_and_only_later_messages_are_estimated() -> None:
    messages: list = [UserMessage(content="start"), *turn(0)]
    usage = Usage(input_tokens=5_000, cache_read_tokens=20_000, output_tokens=50)
    messages += turn(1, usage)  # answer of a call that measured 25,000 input tokens
    counter = TokenCounter()
    expected = 25_000 + 50 + message_tokens(messages[-1])
    assert counter.count(messages) == expected
    assert counter.scale() > 1  # the estimate of the same content is far smaller
    # usage_from past that answer: its usage measured another view; estimate instead.
    fresh = TokenCounter()
    assert fresh.count(messages, usage_from=len(messages)) == approximate_tokens(messages)
    assert fresh.scale() == 1.0


def test_a_rewritten_history_is_counted_again() -> None:
    messages: list = [UserMessage(content="a"), *turn(0), *turn(1)]
    counter = TokenCounter()
    counter.count(messages)
    rewritten = [UserMessage(content="b" * 4_000), *turn(2)]
    assert counter.count(rewritten) == approximate_tokens(rewritten)


def test_images_and_tools_have_a_size() -> None:
    image = UserMessage(content=[ImageBlock(source={"type": "url", "url": "http://x"})])
    assert message_tokens(image) >= 1_600
    assert text_tokens(9) == 3

"""TokenCounter: incremental counts equal a full recount; provider usage is the base when valid."""

from __future__ import annotations

from deepactors import AssistantMessage, ToolCall
from deepactors._sizes import MASK, SHIFT, message_sizes
from deepactors.budget import messages_tokens
from deepactors.history import MessageList
from deepactors.messages import (
    ImageBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolMessage,
    Usage,
    UserMessage,
)
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


def test_one_walk_gives_the_budget_bound_and_the_approximation() -> None:
    # The rules, pinned by hand: "abcdabcdabcd" is 12 characters, so 3 tokens
    # approximated (+4 framing) and 12 bytes bounded (+8 allowance).
    assert message_sizes([UserMessage(content="abcd" * 3)]) == ((8 + 12) << SHIFT) + 3 + 4
    # A tool call: its name and arguments as repr() ("f{'a': 1}", 9 characters),
    # plus its id for the approximation: ceil(11 / 4) + 4 and 8 + 8 + 9.
    call = ToolCall(id="c1", name="f", args={"a": 1})
    answer = AssistantMessage(content="", tool_calls=[call])
    assert message_sizes([answer]) == ((8 + 8 + 9) << SHIFT) + 3 + 4

    # Every kind, with non-ASCII text, images, reasoning and subclasses: each half
    # is what its own reader says, and the packed sizes add up.
    class Answer(AssistantMessage):
        pass

    messages: list = [
        UserMessage(content="héllo wörld"),
        UserMessage(content=[TextBlock(text="ab"), ImageBlock(source={"type": "url", "url": "u"})]),
        AssistantMessage(
            content=[ThinkingBlock(thinking="hmm"), RedactedThinkingBlock(data="xyz")],
            tool_calls=[ToolCall(id="c2", name="g", args={"q": "é", "n": [1, True]})],
        ),
        ToolMessage(tool_call_id="c2", name="g", content="résultat"),
        Answer(content="done", tool_calls=[call]),
    ]
    packed = message_sizes(messages)
    assert packed >> SHIFT == messages_tokens(messages)
    assert packed & MASK == sum(message_tokens(m) for m in messages)
    assert packed == sum(message_sizes([m]) for m in messages)
    assert message_sizes(messages[-1:]) == message_sizes(
        [AssistantMessage(content="done", tool_calls=[call])]
    )


def test_a_history_view_counts_as_the_same_messages_in_a_list() -> None:
    # A history's view reads the history's running sum; a list is walked. Through
    # appends, usage-bearing answers, a summary (a new start and head) and a
    # message replaced by id, both give a full recount's figure.
    history = MessageList([UserMessage(content="start")])
    by_view, by_list = TokenCounter(), TokenCounter()
    start = head = 0
    for i in range(40):
        usage = Usage(input_tokens=900 + i, output_tokens=10) if i % 7 == 3 else None
        for message in turn(i, usage):
            history.put(message)
        if i == 20:
            start, head = 25, 120  # a summary now stands for messages[:25]
        if i == 30:  # an old result edited in place (same id)
            old = history[27]
            history.put(old.model_copy(update={"content": "s" * 900}))
        view = history.view()
        counted = by_view.count(view, start=start, head=head, system_prompt="S")
        listed = by_list.count(list(history), start=start, head=head, system_prompt="S")
        recount = TokenCounter()
        fresh = recount.count(list(history), start=start, head=head, system_prompt="S")
        assert listed == fresh
        if i == 30:
            # The newest answer's usage measured the request before the edit: the
            # view's running sum also sees what the edit changed; a list's count
            # and a recount see only the messages after that answer.
            assert counted == fresh + message_tokens(history[27]) - message_tokens(old)
        else:  # (at 31 a new answer's usage is the base again)
            assert counted == fresh
            assert by_view.scale() == recount.scale()

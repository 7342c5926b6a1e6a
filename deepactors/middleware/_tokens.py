"""Token counts of what a model call sends: an estimate, and a counter that keeps up cheaply.

There is no tokenizer here (the provider's is not public, and one per provider
would be a heavy dependency for a threshold check): a message counts as its
characters / 4, the usual rule of thumb for English text and code, plus a few
tokens of framing. When the provider reported the usage of the previous call,
that exact number is the base and only what was added since is estimated.

:class:`TokenCounter` keeps that count up to date in O(new messages) per call:
it remembers how far it has counted and adds only the messages after that, so
a turn of a 1,000-turn run costs what a turn of a 10-turn run does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import (
    AssistantMessage,
    Content,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolMessage,
    Usage,
)
from ..tools import Tool

__all__ = [
    "CHARS_PER_TOKEN",
    "TokenCounter",
    "approximate_tokens",
    "message_tokens",
    "prompt_tokens",
    "text_tokens",
    "tools_tokens",
]

CHARS_PER_TOKEN = 4
"""Characters per token of the estimate."""

_IMAGE_TOKENS = 1_600  # Claude's cost of a full-size image
_FRAMING = 4  # role markers and separators around each message


def text_tokens(chars: int) -> int:
    """Estimated tokens of ``chars`` characters of text (rounded up)."""
    return -(-chars // CHARS_PER_TOKEN)


def _content_chars(content: Content) -> tuple[int, int]:
    """Characters of text in ``content``, and the tokens of its images."""
    if isinstance(content, str):
        return len(content), 0
    chars = images = 0
    for block in content:
        if isinstance(block, TextBlock):
            chars += len(block.text)
        elif isinstance(block, ThinkingBlock):
            chars += len(block.thinking)
        elif isinstance(block, ImageBlock):
            images += _IMAGE_TOKENS
    return chars, images


def message_tokens(message: Message) -> int:
    """Estimated tokens of one message: its text, tool calls and framing."""
    chars, extra = _content_chars(message.content)
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            chars += len(call.name) + len(call.id) + _args_chars(call.args)
    elif isinstance(message, ToolMessage):
        chars += len(message.tool_call_id)
    return text_tokens(chars) + extra + _FRAMING


def _args_chars(args: Mapping[str, Any]) -> int:
    """About the length of ``args`` as JSON; the common flat cases without encoding."""
    chars = 2
    for key, value in args.items():
        chars += len(key) + 4  # quotes, colon, comma
        if isinstance(value, str):
            chars += len(value) + 2
        elif isinstance(value, bool | int | float) or value is None:
            chars += 6
        else:
            chars += len(json.dumps(value, ensure_ascii=False, default=str))
    return chars


# Characters of each tool's definition, by tool (held, so its id stays its own):
# the schema's JSON is made once per tool, not once per run of every subagent.
_TOOL_CHARS: dict[int, tuple[Tool, str, str, dict[str, Any], int]] = {}
_TOOL_CHARS_MAX = 4096


def _tool_chars(t: Tool) -> int:
    known = _TOOL_CHARS.get(id(t))
    # The same tool with the same fields (a schema edited in place keeps its
    # old size here: this is an estimate).
    if (
        known is not None
        and known[1] is t.name
        and known[2] is t.description
        and known[3] is t.parameters
    ):
        return known[4]
    chars = len(t.name) + len(t.description) + len(json.dumps(t.parameters))
    if len(_TOOL_CHARS) >= _TOOL_CHARS_MAX:
        _TOOL_CHARS.clear()
    _TOOL_CHARS[id(t)] = (t, t.name, t.description, t.parameters, chars)
    return chars


def tools_tokens(tools: Sequence[Tool]) -> int:
    """Estimated tokens of the tool definitions sent with each call."""
    return text_tokens(sum(_tool_chars(t) for t in tools))


def approximate_tokens(
    messages: Sequence[Message], *, system_prompt: str | None = None, tools: Sequence[Tool] = ()
) -> int:
    """Estimated tokens of a whole request (the estimate every counter here uses)."""
    total = sum(message_tokens(m) for m in messages)
    return total + text_tokens(len(system_prompt or "")) + tools_tokens(tools)


def prompt_tokens(usage: Usage) -> int:
    """The input side of a call's usage: uncached, cache-read and cache-written tokens."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class TokenCounter:
    """The size of a conversation view, kept up to date message by message.

    A view is ``head`` tokens (a summary, say) followed by ``messages[start:]``,
    sent with a system prompt and tools. Each :meth:`count` adds only the
    messages that arrived since the last one; a different ``start`` or ``head``
    (a new summary), or a history that was rewritten, starts the count over.

    The newest assistant message that carries usage, at or after ``usage_from``,
    resets the count to what the provider measured for that call (its input
    plus its own output): from then on only the messages after it are estimated.
    ``usage_from`` is where answers to requests of *this* view begin: an answer
    given before a summary measured the longer conversation that is gone.

    One counter per run of one actor (it is not shared between runs).
    """

    __slots__ = (
        "_estimate",
        "_head",
        "_last_id",
        "_overhead_tokens",
        "_since",
        "_start",
        "_tools",
        "_tools_tokens",
        "_upto",
        "_usage",
        "_usage_from",
    )

    def __init__(self) -> None:
        self._start = -1
        self._head = 0
        self._usage_from = 0
        self._upto = 0
        self._last_id: str | None = None
        self._estimate = 0  # estimated tokens of messages[start:upto]
        self._usage: int | None = None  # measured tokens up to the newest usage message
        self._since = 0  # estimated tokens of the messages after that one
        self._tools: Sequence[Tool] | None = None
        self._tools_tokens = 0
        self._overhead_tokens = 0

    def count(
        self,
        messages: Sequence[Message],
        *,
        start: int = 0,
        head: int = 0,
        usage_from: int = 0,
        system_prompt: str | None = None,
        tools: Sequence[Tool] = (),
    ) -> int:
        """Tokens of the request the view ``head + messages[start:]`` makes."""
        upto = self._upto
        if (
            start != self._start
            or head != self._head
            or usage_from != self._usage_from
            or upto > len(messages)
            or (upto > start and messages[upto - 1].id != self._last_id)
        ):
            self._start, self._head, self._usage_from = start, head, usage_from
            upto, self._estimate, self._usage, self._since = start, 0, None, 0
        floor = max(start, usage_from)
        for i in range(upto, len(messages)):
            message = messages[i]
            tokens = message_tokens(message)
            self._estimate += tokens
            usage = message.usage if isinstance(message, AssistantMessage) else None
            measured = prompt_tokens(usage) if usage is not None else 0
            if measured and i >= floor:
                assert usage is not None
                self._usage, self._since = measured + usage.output_tokens, 0
            else:
                self._since += tokens
        self._upto = len(messages)
        self._last_id = messages[-1].id if messages else None
        self._overhead_tokens = self._overhead(system_prompt, tools)
        if self._usage is not None:
            return self._usage + self._since
        return self._estimate + head + self._overhead_tokens

    def scale(self) -> float:
        """Measured tokens per estimated token, as of the last :meth:`count` (1.0 unmeasured).

        How far the character estimate is from the provider's tokenizer for this
        conversation (images, non-English text, code): sizes estimated per message
        (what a summary keeps) are multiplied by it to be comparable with the count.
        """
        if self._usage is None:
            return 1.0
        estimated = self._estimate + self._head + self._overhead_tokens
        return max((self._usage + self._since) / max(estimated, 1), 0.1)

    def _overhead(self, system_prompt: str | None, tools: Sequence[Tool]) -> int:
        if tools is not self._tools:
            # The agent's tool list is one object for every call of a run.
            self._tools, self._tools_tokens = tools, tools_tokens(tools)
        return text_tokens(len(system_prompt or "")) + self._tools_tokens

"""Estimating a request's input tokens for a budget: an upper bound, from sizes in bytes.

Re-exported by :mod:`deepactors.budget`, whose reservations use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .._sizes import SHIFT, message_sizes, utf8_size
from ..messages import Message

__all__ = [
    "PER_TOOL_TOKENS",
    "TOOL_USE_PROMPT_TOKENS",
    "ToolLike",
    "estimate_input_tokens",
    "message_tokens",
    "messages_tokens",
    "text_tokens",
    "tool_tokens",
]

# Allowances on top of the text's size (see estimate_input_tokens; those per
# message, tool call and image are in deepactors._sizes, which measures messages).
PER_TOOL_TOKENS = 16
TOOL_USE_PROMPT_TOKENS = 600


class ToolLike(Protocol):
    """What the estimate reads of a tool (a :class:`~deepactors.tools.Tool`)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> Mapping[str, object]: ...


def text_tokens(text: str) -> int:
    """The estimate's share of a text: its size in UTF-8 bytes."""
    # UTF-8 bytes: an upper bound on the tokens of a byte-level BPE tokenizer,
    # whose every token stands for at least one byte.
    return utf8_size(text)


def message_tokens(message: Message) -> int:
    """The estimate's share of one message (see :func:`estimate_input_tokens`)."""
    return message_sizes((message,)) >> SHIFT


def messages_tokens(messages: Iterable[Message]) -> int:
    """The estimate's share of some messages: the sum of their :func:`message_tokens`."""
    # The bound half of the walk that also approximates them for summarization
    # (deepactors._sizes): a history keeps one running sum of both.
    return message_sizes(messages) >> SHIFT


def tool_tokens(tool: ToolLike) -> int:
    """The estimate's share of one tool definition."""
    return (
        PER_TOOL_TOKENS
        + text_tokens(tool.name)
        + text_tokens(tool.description)
        + text_tokens(json.dumps(tool.parameters))
    )


def estimate_input_tokens(
    messages: Sequence[Message], system_prompt: str | None, tools: Sequence[ToolLike]
) -> int:
    """An estimate of a request's input tokens that errs high.

    The size in UTF-8 bytes of every text the request sends (messages, tool call
    arguments and results, the system prompt, tool names, descriptions and
    schemas), plus allowances for each message's framing, each image, and the
    tool-use instructions providers add when tools are offered. Each token of a
    byte-level BPE tokenizer (Claude's among them) stands for at least one byte, so
    this is an upper bound for them; it is typically 3-4x the real count for
    English, so a tight ``input_tokens`` budget refuses a call a little early
    rather than ever overshooting.
    """
    total = text_tokens(system_prompt) if system_prompt else 0
    total += messages_tokens(messages)
    if tools:
        total += TOOL_USE_PROMPT_TOKENS + sum(tool_tokens(t) for t in tools)
    return total

"""Both size estimates of messages from one walk: the budget's bound and the context estimate.

Two estimates of a message's tokens are made on every model call of a run:

- the *bound* a budget reserves (:mod:`deepactors.budget`): the UTF-8 bytes of
  every text sent, plus allowances, which no byte-level tokenizer's count exceeds;
- the *approximation* summarization and context editing compare with their
  thresholds (:mod:`deepactors.middleware`): characters / 4 plus framing, close
  to a real count for English text.

Both are sums over messages, so a history can keep a running sum of them
(:meth:`~deepactors.history.MessageView.total`) and measure each message once.
:func:`message_sizes` makes both in one pass and packs them in one int, the
bound in the high bits and the approximation in the low :data:`SHIFT`: a packed
sum is the sum of the packed sizes, so one running sum serves both readers
(``sizes >> SHIFT`` and ``sizes & MASK``), and a run with a budget and
summarization walks its messages once, not twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from .messages import (
    AssistantMessage,
    Content,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "BOUND_IMAGE_TOKENS",
    "CHARS_PER_TOKEN",
    "FRAMING_TOKENS",
    "IMAGE_TOKENS",
    "MASK",
    "PER_MESSAGE_TOKENS",
    "SHIFT",
    "message_sizes",
    "utf8_size",
]

SHIFT = 48
"""Bits of the approximation in a packed size (a history of 2**48 tokens is not sent)."""
MASK = (1 << SHIFT) - 1

# The bound's allowances (see deepactors.budget.estimate_input_tokens).
PER_MESSAGE_TOKENS = 8
BOUND_IMAGE_TOKENS = 2_000

# The approximation's rule: characters / 4, rounded up, per message.
CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_600  # Claude's cost of a full-size image
FRAMING_TOKENS = 4  # role markers and separators around each message

_PLAIN = (UserMessage, SystemMessage)  # their sizes are their content's


def utf8_size(text: str) -> int:
    """The size of ``text`` in UTF-8 bytes."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def message_sizes(messages: Iterable[Message]) -> int:
    """The bound and the approximation of ``messages``, packed: ``bound << SHIFT | approx``.

    The bound of a message: :data:`PER_MESSAGE_TOKENS`, the UTF-8 bytes of its
    text (and reasoning) blocks, :data:`BOUND_IMAGE_TOKENS` per image, a tool
    result's tool name, and per tool call the allowance plus the bytes of its name
    and arguments. The approximation: its characters (text, visible reasoning,
    tool call ids, names and arguments, a result's call id) / 4 rounded up, plus
    :data:`IMAGE_TOKENS` per image and :data:`FRAMING_TOKENS`.

    Tool call arguments are measured as ``repr()`` of the parsed value: as long as
    their JSON or longer (``True`` vs ``true``), and several times cheaper to make.
    """
    # One loop with the common cases inline, not a call per message: this runs
    # for every message of every request. Kinds are told by type(): a negative
    # isinstance() check of a pydantic model class goes through ABCMeta, slower
    # than the rest of this together.
    total = 0
    for message in messages:
        content = message.content
        if type(content) is str and content.isascii():
            chars = len(content)
            bound = PER_MESSAGE_TOKENS + chars
            extra = FRAMING_TOKENS
        else:
            bound, chars, extra = _content_sizes(content)
            bound += PER_MESSAGE_TOKENS
            extra += FRAMING_TOKENS
        if type(message) is ToolMessage:
            name = message.name
            bound += len(name) if name.isascii() else utf8_size(name)
            chars += len(message.tool_call_id)
        elif type(message) is AssistantMessage:
            for call in message.tool_calls:
                text = call.name + repr(call.args)
                size = len(text)
                bound += PER_MESSAGE_TOKENS + (size if text.isascii() else utf8_size(text))
                chars += size + len(call.id)
        elif type(message) not in _PLAIN:
            more_bound, more_chars = _subclass_sizes(message)
            bound += more_bound
            chars += more_chars
        total += (bound << SHIFT) + extra - (-chars // CHARS_PER_TOKEN)
    return total


def _content_sizes(content: Content) -> tuple[int, int, int]:
    """The bound of ``content``, its characters, and its images' approximation."""
    if isinstance(content, str):
        return utf8_size(content), len(content), 0
    bound = chars = images = 0
    for block in content:
        if isinstance(block, TextBlock):
            bound += utf8_size(block.text)
            chars += len(block.text)
        elif isinstance(block, ThinkingBlock):
            bound += utf8_size(block.thinking)
            chars += len(block.thinking)
        elif isinstance(block, RedactedThinkingBlock):
            # Sent back verbatim, so bounded; not text a reader sees, so not approximated.
            bound += utf8_size(block.data)
        elif isinstance(block, ImageBlock):
            bound += BOUND_IMAGE_TOKENS
            images += IMAGE_TOKENS
    return bound, chars, images


def _subclass_sizes(message: Message) -> tuple[int, int]:
    # A subclass of a message kind: its tool calls or tool result, as above.
    bound = chars = 0
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            text = call.name + repr(call.args)
            bound += PER_MESSAGE_TOKENS + utf8_size(text)
            chars += len(text) + len(call.id)
    elif isinstance(message, ToolMessage):
        bound += utf8_size(message.name)
        chars += len(message.tool_call_id)
    return bound, chars

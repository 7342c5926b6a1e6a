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

import functools
import json
from collections.abc import Sequence

from .._sizes import CHARS_PER_TOKEN, MASK, message_sizes
from ..history import MessageView
from ..messages import AssistantMessage, Message, SystemMessage, ToolMessage, Usage, UserMessage
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

_UNMEASURED = (ToolMessage, UserMessage, SystemMessage)  # kinds that carry no usage


def text_tokens(chars: int) -> int:
    """Estimated tokens of ``chars`` characters of text (rounded up)."""
    return -(-chars // CHARS_PER_TOKEN)


def message_tokens(message: Message) -> int:
    """Estimated tokens of one message: its text, tool calls and framing."""
    # The low part of the walk that also bounds a message for budgets: a
    # history keeps one running sum of both (deepactors._sizes).
    return message_sizes((message,)) & MASK


def _tool_chars(t: Tool) -> int:
    return len(t.name) + len(t.description) + len(json.dumps(t.parameters))


# A run's tool list is one tuple for all its calls and all runs of its agent: its
# size is made once, not once per run of every subagent (a Tool hashes by
# identity, and so does a tuple of them; a tool edited in place keeps its old
# size here, which an estimate can afford).
@functools.lru_cache(maxsize=1024)
def _toolset_tokens(tools: tuple[Tool, ...]) -> int:
    return text_tokens(sum(_tool_chars(t) for t in tools))


def tools_tokens(tools: Sequence[Tool]) -> int:
    """Estimated tokens of the tool definitions sent with each call."""
    if isinstance(tools, tuple):
        return _toolset_tokens(tools)
    return text_tokens(sum(_tool_chars(t) for t in tools))  # a list may change: measured


def approximate_tokens(
    messages: Sequence[Message], *, system_prompt: str | None = None, tools: Sequence[Tool] = ()
) -> int:
    """Estimated tokens of a whole request (the estimate every counter here uses)."""
    total = message_sizes(messages) & MASK
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
    When ``messages`` is a history's :class:`~deepactors.history.MessageView`,
    the history's running sum of :func:`~deepactors._sizes.message_sizes` is
    read, so each message is measured once for every counter and budget of the run.

    The newest assistant message that carries usage, at or after ``usage_from``,
    resets the count to what the provider measured for that call (its input
    plus its own output): from then on only the messages after it are estimated.
    ``usage_from`` is where answers to requests of *this* view begin: an answer
    given before a summary measured the longer conversation that is gone.

    One counter per run of one actor (it is not shared between runs).
    """

    __slots__ = (
        "_before",
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
        "_viewed",
    )

    def __init__(self) -> None:
        self._start = -1
        self._head = 0
        self._usage_from = 0
        self._viewed = False
        self._upto = 0
        self._last_id: str | None = None
        self._before = 0  # a view's history's estimate of messages[:start]
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
        upto, n = self._upto, len(messages)
        # type(): a negative isinstance() of a Sequence ABC costs more than this call.
        viewed = type(messages) is MessageView
        if (
            start != self._start
            or head != self._head
            or usage_from != self._usage_from
            or viewed is not self._viewed
            or upto > n
            or (upto > start and messages[upto - 1].id != self._last_id)
        ):
            upto = self._restart(messages, start, head, usage_from, viewed)
        if upto < n:
            new = messages[upto:n]
            if viewed:
                assert isinstance(messages, MessageView)
                estimate = (messages.total(message_sizes) & MASK) - self._before
                added = estimate - self._estimate
            else:
                added = message_sizes(new) & MASK
                estimate = self._estimate + added
            self._estimate, self._upto, self._last_id = estimate, n, new[-1].id
            self._take_usage(new, upto, max(start, usage_from), added)
        self._overhead_tokens = self._overhead(system_prompt, tools)
        if self._usage is not None:
            return self._usage + self._since
        return self._estimate + head + self._overhead_tokens

    def _restart(
        self, messages: Sequence[Message], start: int, head: int, usage_from: int, viewed: bool
    ) -> int:
        """Count ``messages[start:]`` from nothing; returns where the count stands."""
        self._start, self._head, self._usage_from, self._viewed = start, head, usage_from, viewed
        self._estimate, self._usage, self._since, self._upto = 0, None, 0, start
        self._before = 0
        if viewed and start:
            # The history's running sum covers messages[:start] too: what that
            # part measures is taken off each total. Measured from the shorter
            # side (the running sum gives the whole): a summary that drops a
            # few messages before 100,000 kept is not a pass over the kept.
            assert isinstance(messages, MessageView)
            if start <= len(messages) - start:
                self._before = message_sizes(messages[:start]) & MASK
            else:
                whole = messages.total(message_sizes) & MASK
                self._before = whole - (message_sizes(messages[start:]) & MASK)
        return start

    def _take_usage(self, new: Sequence[Message], first: int, floor: int, added: int) -> None:
        """Reset to the newest measured answer among ``new`` (``messages[first:]``)."""
        for i in range(len(new) - 1, max(floor - first, 0) - 1, -1):
            message = new[i]
            # type() first: a negative isinstance() of a pydantic class goes
            # through ABCMeta (the positive one for the exact class does not).
            if type(message) in _UNMEASURED or not isinstance(message, AssistantMessage):
                continue
            usage = message.usage
            measured = prompt_tokens(usage) if usage is not None else 0
            if measured:
                assert usage is not None
                self._usage = measured + usage.output_tokens
                self._since = message_sizes(new[i + 1 :]) & MASK
                return
        self._since += added

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

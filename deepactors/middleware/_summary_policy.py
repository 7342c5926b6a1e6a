"""When summarization fires and how much it keeps: context sizes, limits, the cut point."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..errors import ConfigurationError
from ..messages import AssistantMessage, Message, ToolMessage
from ._tokens import message_tokens

__all__ = [
    "DEFAULT_KEEP_MESSAGES",
    "DEFAULT_KEEP_WITH_WINDOW",
    "DEFAULT_TRIGGER_TOKENS",
    "DEFAULT_TRIGGER_WITH_WINDOW",
    "ContextSize",
    "Limits",
    "check_size",
    "cut_point",
    "resolve_limits",
    "truncate_args",
]

ContextSize: TypeAlias = tuple[Literal["tokens", "fraction", "messages"], float]
"""``("tokens", n)``, ``("fraction", f)`` of the model's context window, or ``("messages", n)``."""

DEFAULT_TRIGGER_WITH_WINDOW: ContextSize = ("fraction", 0.85)
DEFAULT_KEEP_WITH_WINDOW: ContextSize = ("fraction", 0.10)
DEFAULT_TRIGGER_TOKENS: ContextSize = ("tokens", 170_000)
DEFAULT_KEEP_MESSAGES: ContextSize = ("messages", 6)


def check_size(size: object, what: str) -> ContextSize:
    """Validate a :data:`ContextSize` argument.

    Raises:
        ConfigurationError: Not a ``(kind, number)`` pair of a known kind and range.
    """
    if not (isinstance(size, tuple) and len(size) == 2):
        raise ConfigurationError(
            f"{what} must be ('tokens', n), ('fraction', f) or ('messages', n), not {size!r}"
        )
    kind, value = size
    if kind == "fraction":
        if not isinstance(value, int | float) or not 0 < value <= 1:
            raise ConfigurationError(f"{what}: a fraction must be in (0, 1], not {value!r}")
    elif kind in ("tokens", "messages"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{what}: {kind} must be a whole number >= 1, not {value!r}")
    else:
        raise ConfigurationError(
            f"{what}: kind must be 'tokens', 'fraction' or 'messages', not {kind!r}"
        )
    return size


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The sizes one agent's summarization works with, in tokens or messages.

    Attributes:
        trigger_messages: Summarize when the view has more messages than this.
        trigger_tokens: Summarize when the request is estimated above this.
        keep_messages: Keep this many newest messages.
        keep_tokens: Keep the newest messages that fit in this many tokens.
        budget_tokens: The most tokens of old conversation one summary call reads.
    """

    trigger_messages: int | None = None
    trigger_tokens: int | None = None
    keep_messages: int | None = None
    keep_tokens: int | None = None
    budget_tokens: int

    def over(self, tokens: int, messages: int) -> bool:
        """Whether a view of this size should be summarized."""
        if self.trigger_tokens is not None:
            return tokens > self.trigger_tokens
        assert self.trigger_messages is not None
        return messages > self.trigger_messages

    def eligible(self, tokens: int, messages: int) -> bool:
        """Whether a view is big enough to compact on request (half the trigger)."""
        if self.trigger_tokens is not None:
            return tokens >= self.trigger_tokens // 2
        assert self.trigger_messages is not None
        return messages >= self.trigger_messages // 2


def _tokens(size: ContextSize, window: int | None, what: str) -> int:
    kind, value = size
    if kind == "tokens":
        return int(value)
    if window is None:
        raise ConfigurationError(
            f"{what} is a fraction of the context window, but the model declares none; "
            "give ('tokens', n) instead"
        )
    return max(int(window * value), 1)


def resolve_limits(
    trigger: ContextSize | None,
    keep: ContextSize | None,
    budget: int | None,
    window: int | None,
) -> Limits:
    """The :class:`Limits` for a model with context window ``window`` (None: unknown).

    Defaults, as in deepagents: with a window, summarize at 85% of it and keep
    the newest 10%; without, summarize at 170k tokens and keep 6 messages. The
    summary call reads at most ``budget`` tokens of old conversation; by default
    as many as the trigger allows (so it fits wherever the agent's own calls do).
    """
    if trigger is None:
        trigger = DEFAULT_TRIGGER_WITH_WINDOW if window else DEFAULT_TRIGGER_TOKENS
    if keep is None:
        keep = DEFAULT_KEEP_WITH_WINDOW if window else DEFAULT_KEEP_MESSAGES
    trigger_tokens = None if trigger[0] == "messages" else _tokens(trigger, window, "trigger")
    keep_tokens = None if keep[0] == "messages" else _tokens(keep, window, "keep")
    if trigger_tokens is not None and keep_tokens is not None and keep_tokens >= trigger_tokens:
        raise ConfigurationError(
            f"keep ({keep_tokens} tokens) must be less than trigger ({trigger_tokens} tokens), "
            "or every summary would be followed by another"
        )
    if budget is None:
        fallback = int(window * 0.85) if window else int(DEFAULT_TRIGGER_TOKENS[1])
        budget = trigger_tokens or fallback
    return Limits(
        trigger_tokens=trigger_tokens,
        trigger_messages=int(trigger[1]) if trigger[0] == "messages" else None,
        keep_tokens=keep_tokens,
        keep_messages=int(keep[1]) if keep[0] == "messages" else None,
        budget_tokens=budget,
    )


def cut_point(
    messages: Sequence[Message], start: int, limits: Limits, *, force: bool, scale: float = 1.0
) -> int:
    """Where the kept tail begins: ``messages[start:cut]`` are summarized.

    Never between a tool call and its results: a cut that lands on a tool result
    moves back to the assistant message that made the call (keeping the whole
    turn), or, when that is the first message of the view, forward past the
    results. The newest turn is always kept. With ``force`` (the model refused
    the request as too long) and nothing to drop under the keep policy,
    everything before the newest turn goes. ``scale`` converts the per-message
    estimates into the count's units (see :meth:`TokenCounter.scale`).
    """
    n = len(messages)
    if limits.keep_messages is not None:
        cut = max(n - limits.keep_messages, start)
    else:
        assert limits.keep_tokens is not None
        cut, used = n, 0.0
        while cut > start:
            tokens = message_tokens(messages[cut - 1]) * scale
            if used + tokens > limits.keep_tokens:
                break
            used += tokens
            cut -= 1
    # The newest turn always stays: the model answers what it just got.
    cut = _safe(messages, start, min(cut, n - 1))
    if cut <= start and force:
        cut = _safe(messages, start, n - 1)
    return cut


def _safe(messages: Sequence[Message], start: int, cut: int) -> int:
    n = len(messages)
    i = cut
    if start < i < n:
        # Back over the turn's results (a slice walked at C speed, not an index
        # per message: a wide fan-out's turn has 100,000 of them).
        i -= _results_run(reversed(messages[start + 1 : i + 1]))
    if i > start:
        return i
    j = max(cut, start)
    return j + _results_run(messages[j:]) if j < n else j


def _results_run(messages: Iterable[Message]) -> int:
    """How many tool results ``messages`` begins with."""
    return sum(1 for _ in itertools.takewhile(_is_result, messages))


def _is_result(message: Message) -> bool:
    return isinstance(message, ToolMessage)


def truncate_args(message: AssistantMessage, limit: int) -> AssistantMessage | None:
    """A copy of ``message`` with string tool arguments over ``limit`` chars cut short.

    None when nothing is that long. Only for what the model sees of old turns: the
    stored history keeps the arguments whole.
    """
    long = False
    for call in message.tool_calls:
        for value in call.args.values():
            if isinstance(value, str) and len(value) > limit:
                long = True
                break
    if not long:
        return None
    calls = []
    for call in message.tool_calls:
        args = {
            k: (
                f"{v[:20]}... [argument truncated in this view: {len(v)} characters]"
                if isinstance(v, str) and len(v) > limit
                else v
            )
            for k, v in call.args.items()
        }
        calls.append(call.model_copy(update={"args": args}) if args != call.args else call)
    return message.model_copy(update={"tool_calls": calls})

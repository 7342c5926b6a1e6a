"""Drawing on a run's budget: the reservation around each model call and tool call.

The ledger itself (:mod:`deepactors.budget`) knows nothing of requests and
events; this module turns a model request into its worst case, reserves it
(waiting while calls in flight hold what it needs), and settles it with the
answer's usage. See :mod:`deepactors.budget` for why this cannot overshoot.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import anyio

from .._sizes import SHIFT, message_sizes
from ..budget import (
    DEFAULT_OUTPUT_RESERVATION,
    TOOL_USE_PROMPT_TOKENS,
    BudgetLedger,
    Hold,
    Rates,
    Refusal,
    messages_tokens,
    text_tokens,
    tool_tokens,
)
from ..context import RunContext, RunKey
from ..errors import BudgetExceeded, ModelError
from ..events import BudgetExhausted
from ..history import MessageView
from ..messages import Message
from ..models import ChatModel, ModelRequest
from ..models.profiles import ModelPrices, profile_of
from ..tools import Tool

__all__ = ["reserve", "settle_failed", "tool_refused"]


class _Sizes:
    """The messages of a run's last request that was not its history's view, and their estimate.

    (The actor's own history view keeps its running total itself:
    :meth:`MessageView.total`.) A request a middleware rewrote as a list usually
    grows at its end too: after one C-speed comparison of the prefix (list
    ``==`` compares by identity first) only the new messages are measured.
    """

    __slots__ = ("messages", "total")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.total = 0


_SIZES = RunKey("budget.sizes", _Sizes)


class _LastFixed:
    """The last system prompt and tool tuple estimated, and their share.

    Every request of an agent (and of all its subagents of one spec) sends the
    same two objects: an identity check here is all most calls need. One
    entry, replaced whole (a tuple): a reader on another loop's thread sees an
    old entry or a new one, each consistent.
    """

    __slots__ = ("entry",)

    def __init__(self) -> None:
        self.entry: tuple[str | None, object, int] = (None, None, 0)


_LAST_FIXED = _LastFixed()


# Tools, tool lists and system prompts live as long as their agent and go with
# every request: each is measured once (a Tool hashes by identity, a tuple of them
# too, and a str keeps its hash).


@functools.lru_cache(maxsize=4096)
def _tool_tokens(tool: Tool) -> int:
    return tool_tokens(tool)


@functools.lru_cache(maxsize=1024)
def _toolset_tokens(tools: tuple[Tool, ...]) -> int:
    return TOOL_USE_PROMPT_TOKENS + sum(_tool_tokens(t) for t in tools)


@functools.lru_cache(maxsize=1024)
def _prompt_tokens(prompt: str) -> int:
    return text_tokens(prompt)


def _fixed_tokens(prompt: str | None, tools: Sequence[Tool]) -> int:
    # (The caller looked in _LAST_FIXED first.)
    tokens = _prompt_tokens(prompt) if prompt else 0
    if isinstance(tools, tuple):
        tokens += _toolset_tokens(tools) if tools else 0
        _LAST_FIXED.entry = (prompt, tools, tokens)
    elif tools:  # a list could change in place: measured each time
        tokens += TOOL_USE_PROMPT_TOKENS + sum(_tool_tokens(t) for t in tools)
    return tokens


def _list_tokens(run: RunContext | None, sent: Sequence[Message]) -> int:
    if run is None:  # a request made outside a run: nothing to remember it by
        return messages_tokens(sent)
    seen = run.local(_SIZES)
    messages = list(sent)
    before = seen.messages
    known = len(before)
    if known <= len(messages) and messages[:known] == before:
        total = seen.total + messages_tokens(messages[known:])
    else:
        total = messages_tokens(messages)
    seen.messages, seen.total = messages, total
    return total


def _refused(run: RunContext, refusal: Refusal, what: str) -> Exception:
    emit = run.emit
    if emit is not None:
        emit(
            BudgetExhausted(
                path=run.path,
                run_id=run.run_id,
                resource=refusal.resource,
                limit=refusal.limit,
                spent=refusal.spent,
            )
        )
    return refusal.error(what)


def reserve(
    ledger: BudgetLedger, request: ModelRequest, model: ChatModel
) -> tuple[Hold, ModelRequest] | anyio.Event:
    """Reserve a model call's worst case on ``ledger``, or say what to wait for.

    A synchronous step (no ``await``, so nothing interleaves between the check
    and the reservation). The caller makes the call with the request returned:
    with an output-token limit, a call that would use more output tokens than
    are left gets a ``max_tokens`` of what is left. It then settles the hold,
    whatever the call's outcome: ``ledger.settle(hold, message.usage)``, or
    :func:`settle_failed`.

    Returns:
        The hold and the request to send; or an event that is set when calls in
        flight settle, after which the caller asks again.

    Raises:
        BudgetExceeded: The budget can never cover the call; it must not be made.
    """
    need_in = 0
    if ledger.tracks_input:
        sent = request.messages
        # type() rather than isinstance(): a Sequence ABC's negative isinstance()
        # check costs more than the whole estimate of a view.
        if type(sent) is MessageView:
            # Each message measured once per history, in the walk that also
            # sizes it for summarization (the bound is the high part).
            need_in = sent.total(message_sizes) >> SHIFT
        else:
            need_in = _list_tokens(request.run, sent)
        prompt, tools = request.system_prompt, request.tools
        last = _LAST_FIXED.entry
        if prompt is last[0] and tools is last[1]:
            need_in += last[2]
        else:
            need_in += _fixed_tokens(prompt, tools)
    want_out = 0
    # Whether the request will carry the max_tokens reserved (else it must be set).
    bounded = True
    if ledger.tracks_output:
        # The call's max_tokens: the request's, else the model's, else its
        # profile's, else the default.
        settings = request.settings
        asked = settings.get("max_tokens") if settings else None
        if asked is None:
            # SupportsMaxTokens, read without isinstance(): a runtime protocol
            # check costs more than the rest of the reservation together.
            asked = getattr(model, "max_tokens", _ABSENT)
            if asked is None:
                # A model that takes a max_tokens but sends none of its own (an
                # OpenAI-compatible server's): the call is made with the one reserved.
                bounded = False
            if asked is None or asked is _ABSENT:
                asked = _profile_max_tokens(model) or DEFAULT_OUTPUT_RESERVATION
        if type(asked) is int and asked > 0:  # the common case (type(): not a bool)
            want_out = asked
        else:  # an int subclass, or a setting that is no max_tokens: the model's
            want_out = (
                _positive_int(asked)
                or _positive_int(getattr(model, "max_tokens", None))
                or DEFAULT_OUTPUT_RESERVATION
            )
    rates = None
    if ledger.tracks_usd:
        rates = _rates(model)
        if rates is None:
            raise _unpriced(request, model)
    outcome = ledger.try_reserve(need_in, want_out, rates)
    if isinstance(outcome, Hold):
        if outcome.output_tokens < want_out or not bounded:
            settings = {**request.settings, "max_tokens": outcome.output_tokens}
            request = request.replace(settings=settings)
        return outcome, request
    if isinstance(outcome, Refusal):
        run = request.run
        assert run is not None
        raise _refused(run, outcome, f"model call {run.step} of {run.path}")
    return outcome  # calls in flight hold what this one needs


_ABSENT = object()


def _profile_max_tokens(model: ChatModel) -> int | None:
    profile = profile_of(model)
    return None if profile is None else profile.max_output_tokens


def _rates(model: ChatModel) -> Rates | None:
    """The model's prices per token in pico-dollars, or None when unknown."""
    profile = profile_of(model)
    if profile is None or profile.prices is None:
        return None
    return _pico_rates(profile.prices)


@functools.lru_cache(maxsize=256)
def _pico_rates(prices: ModelPrices) -> Rates:
    return prices.per_token_pico()


def _unpriced(request: ModelRequest, model: ChatModel) -> BudgetExceeded:
    limit = next(led.limits.usd for led in _ledgers(request) if led.limits.usd is not None)
    run = request.run
    where = f"model call {run.step} of {run.path}" if run is not None else "the model call"
    return BudgetExceeded(
        f"the budget limits dollars, and model {model.model_name!r} has no known prices, "
        f"so {where} was not made: give it a profile with prices "
        "(deepactors.models.register_profile, or the model's profile=)",
        resource="usd",
        limit=limit if limit is not None else 0.0,
        spent=0.0,
    )


def _ledgers(request: ModelRequest) -> list[BudgetLedger]:
    run = request.run
    ledger = run.budget if run is not None else None
    out: list[BudgetLedger] = []
    while ledger is not None:
        out.append(ledger)
        ledger = ledger.parent
    return out


def _positive_int(value: object) -> int | None:
    """``value`` as a ``max_tokens``: a whole number above 0 (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return int(value)
    return None


def settle_failed(ledger: BudgetLedger, hold: Hold, error: BaseException) -> None:
    """End the reservation of a model call that raised ``error``.

    (A call that answered settles with ``ledger.settle(hold, message.usage)``.)
    """
    if isinstance(error, ModelError):
        # The provider refused or failed the request: the call counts, its
        # tokens were not spent.
        ledger.settle(hold, None, charge=False)
    else:
        # Cut off (cancelled, or failed in a way that says nothing of its
        # tokens): charged its whole reservation, the safe side.
        ledger.settle(hold, None)


def tool_refused(run: RunContext, refusal: Refusal, tool_name: str) -> str:
    """What a tool call the budget refused answers (after the event is sent)."""
    return f"{_refused(run, refusal, f'the {tool_name} call')}. Finish with what you have."

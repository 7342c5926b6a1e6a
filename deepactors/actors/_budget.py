"""Drawing on a run's budget: the reservation around each model call and tool call.

The ledger itself (:mod:`deepactors.budget`) knows nothing of requests and
events; this module turns a model request into its worst case, reserves it
(waiting while calls in flight hold what it needs), and settles it with the
answer's usage. See :mod:`deepactors.budget` for why this cannot overshoot.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence

from ..budget import (
    DEFAULT_OUTPUT_RESERVATION,
    TOOL_USE_PROMPT_TOKENS,
    BudgetLedger,
    Hold,
    Refusal,
    message_tokens,
    text_tokens,
    tool_tokens,
)
from ..context import RunContext, RunKey
from ..errors import ModelError
from ..events import BudgetExhausted
from ..history import MessageView
from ..messages import AssistantMessage, Message
from ..models import ChatModel, ModelRequest
from ..tools import Tool

__all__ = ["budgeted_call", "take_tool_call"]


class _Sizes:
    """The messages a run's last request sent, and their estimate.

    A run's history grows at its end, so the next request's estimate is the last
    one plus the new messages. For the actor's own history view that is known in
    O(1) (:meth:`MessageView.extends`); for any other sequence, after one C-speed
    comparison of the prefix (list ``==`` compares by identity first). A message
    replaced or removed, as a summary or an edit does, means the whole request is
    measured again.
    """

    __slots__ = ("fixed", "messages", "prompt", "tools", "total")

    def __init__(self) -> None:
        self.messages: Sequence[Message] = ()
        self.total = 0
        # The last request's system prompt and tools (the same objects turn
        # after turn), and their share of the estimate.
        self.prompt: str | None = None
        self.tools: object = None
        self.fixed = 0


_SIZES = RunKey("budget.sizes", _Sizes)


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


def _estimate(run: RunContext, request: ModelRequest) -> int:
    seen = run.local(_SIZES)
    sent = request.messages
    before = seen.messages
    if isinstance(sent, MessageView):
        # The actor's history view: a later one of the same history extends the
        # last in O(1) unless something was replaced or removed in between.
        if isinstance(before, MessageView) and sent.extends(before):
            total = seen.total + sum(map(message_tokens, sent[len(before) :]))
        else:
            total = sum(map(message_tokens, sent[:]))
        seen.messages, seen.total = sent, total
    else:
        messages = list(sent)
        known = len(before)
        if known <= len(messages) and messages[:known] == list(before):
            total = seen.total + sum(map(message_tokens, messages[known:]))
        else:
            total = sum(map(message_tokens, messages))
        seen.messages, seen.total = messages, total
    prompt, tools = request.system_prompt, request.tools
    if prompt is seen.prompt and tools is seen.tools:
        return total + seen.fixed  # an agent's next turn: the same prompt and tools
    fixed = _prompt_tokens(prompt) if prompt else 0
    if isinstance(tools, tuple):
        fixed += _toolset_tokens(tools) if tools else 0
        seen.prompt, seen.tools, seen.fixed = prompt, tools, fixed
    elif tools:  # a list could change in place: measured each time
        fixed += TOOL_USE_PROMPT_TOKENS + sum(_tool_tokens(t) for t in tools)
    return total + fixed


def _max_tokens(request: ModelRequest, model: ChatModel) -> int:
    asked = request.settings.get("max_tokens")
    if isinstance(asked, int) and asked > 0:
        return asked
    # SupportsMaxTokens, read without isinstance(): a runtime protocol check costs
    # more than the rest of the reservation together.
    limit = getattr(model, "max_tokens", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    return DEFAULT_OUTPUT_RESERVATION


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


async def budgeted_call(
    ledger: BudgetLedger,
    request: ModelRequest,
    model: ChatModel,
    call: Callable[[ChatModel, ModelRequest], Awaitable[AssistantMessage]],
) -> AssistantMessage:
    """Make ``call(model, request)`` inside a reservation on ``ledger``.

    With an output-token limit, a call that would use more output tokens than
    are left is made with a ``max_tokens`` of what is left.

    Raises:
        BudgetExceeded: The budget can never cover the call; it was not made.
    """
    run = request.run
    assert run is not None
    need_in = _estimate(run, request) if ledger.tracks_input else 0
    want_out = _max_tokens(request, model) if ledger.tracks_output else 0
    while True:
        outcome = ledger.try_reserve(need_in, want_out)
        if isinstance(outcome, Hold):
            break
        if isinstance(outcome, Refusal):
            raise _refused(run, outcome, f"model call {run.step} of {run.path}")
        await outcome.wait()  # calls in flight hold what this one needs
    hold = outcome
    if hold.output_tokens < want_out:
        request = request.replace(settings={**request.settings, "max_tokens": hold.output_tokens})
    try:
        message = await call(model, request)
    except ModelError:
        # The provider refused or failed the request: the call counts, its
        # tokens were not spent.
        ledger.settle(hold, None, charge=False)
        raise
    except BaseException:
        # Cut off (cancelled, or failed in a way that says nothing of its
        # tokens): charged its whole reservation, the safe side.
        ledger.settle(hold, None)
        raise
    ledger.settle(hold, message.usage)
    return message


def take_tool_call(run: RunContext, ledger: BudgetLedger, tool_name: str) -> str | None:
    """Count one tool call against the budget; the reason it is refused, if it is."""
    refusal = ledger.take_tool_call()
    if refusal is None:
        return None
    return str(_refused(run, refusal, f"the {tool_name} call"))

"""Budgets: limits on what a whole actor tree may spend, that parallel children cannot overshoot.

``agent.ainvoke(..., budget=Budget(model_calls=50, output_tokens=200_000, usd=2.0))``
covers the run and every subagent under it. The tree shares one :class:`BudgetLedger`.
Before each model call, the calling actor *reserves* the call's worst case from
it: one model call, the request's input tokens (an estimate that errs high, see
:func:`estimate_input_tokens`), its ``max_tokens`` of output, and with a ``usd``
limit the price of both at the model's prices (input at the dearest of its input,
cached and cache-write prices); after the call it *settles* the reservation with
the usage the model reported, and its cost at the same prices, giving the rest
back. A reservation that does not fit beside the ones in flight waits for them to
settle; one that could never fit is refused, and the call is not made. So the
limits hold however many children call at once: no branch checks a total that
another branch is about to change.

A subagent spec may carry a smaller ``budget`` of its own: its ledger is a child
of its parent's, and each call reserves at every level, so the subagent spends
at most its own limits and its spending counts against every budget above it.

Thread safety
    A ledger is changed only by code running on its event loop's thread, and
    every check-and-reserve is one synchronous step with no ``await`` inside, so
    two tasks of one loop cannot interleave in it: plain integers suffice, and
    there is no lock for the tree's calls to queue on. The only wait is for a
    reservation that does not fit until others settle. (Sync tools run in worker
    threads, but never touch the ledger: tool calls are counted on the loop
    before the tool runs.)
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._estimate import PER_TOOL_TOKENS as PER_TOOL_TOKENS
from ._estimate import TOOL_USE_PROMPT_TOKENS as TOOL_USE_PROMPT_TOKENS
from ._estimate import ToolLike as ToolLike
from ._estimate import estimate_input_tokens as estimate_input_tokens
from ._estimate import message_tokens as message_tokens
from ._estimate import messages_tokens as messages_tokens
from ._estimate import text_tokens as text_tokens
from ._estimate import tool_tokens as tool_tokens
from ._ledger import DEFAULT_OUTPUT_RESERVATION as DEFAULT_OUTPUT_RESERVATION
from ._ledger import PICO as PICO
from ._ledger import Budget as Budget
from ._ledger import BudgetLedger as BudgetLedger
from ._ledger import BudgetReport as BudgetReport
from ._ledger import Hold as Hold
from ._ledger import Rates as Rates
from ._ledger import Refusal as Refusal
from ._ledger import Resource as Resource

__all__ = [
    "DEFAULT_OUTPUT_RESERVATION",
    "PICO",
    "Budget",
    "BudgetLedger",
    "BudgetReport",
    "Hold",
    "Rates",
    "Refusal",
    "estimate_input_tokens",
    "message_tokens",
    "messages_tokens",
    "text_tokens",
    "tool_tokens",
]

# Reprs, pickles and tracebacks name the public package, not the private module.
_publish(__all__, __name__, globals())

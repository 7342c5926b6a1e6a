"""What a remote child may spend and for how long: carried with its run, and charged back.

A remote subagent's run is sent with the time its parent has left and the
budget its parent has left, under one key of the run's
``config.configurable`` (:data:`LIMITS_KEY`)::

    {"config": {"configurable": {"deepactors_limits": {
        "timeout": 12.5,
        "budget": {"model_calls": 20, "output_tokens": 80000, "usd": 0.35}}}}}

The entry is :class:`deepactors.limits.Limits`' wire shape (``Limits.configurable``);
a deepactors server reads it into the run's ``timeout`` and ``budget``
(``Limits.from_config``), so the child stops there even if its parent's process
is gone. LangGraph's own server keeps the key in the run's config and ignores
it: against it, only the local side of the deadline holds (the parent cancels
the run when its time is up).

What the child spent is charged to the parent's ledger (:func:`charge`) as
its run's events report it (:mod:`._meter`), and when it ends, what those
charges missed (:func:`recorded`, from the run's metadata: ``usage``, and
``budget`` for a budgeted run), so the parent's next calls see it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import get_args

from ..budget import PICO, Budget, BudgetLedger, Refusal, Resource
from ..limits import LIMITS_KEY, Limits
from ..messages import Usage

__all__ = [
    "LIMITS_KEY",
    "Spent",
    "charge",
    "exhausted",
    "one_call",
    "read_limits",
    "recorded",
    "remaining_budget",
]

# Budget's fields, in their order (a test holds the two together).
_BUDGET_FIELDS: tuple[Resource, ...] = get_args(Resource)


def remaining_budget(ledger: BudgetLedger | None, own: Budget | None) -> Budget | None:
    """What a child may still spend: the least left at every level above it, and its own.

    "Left" is the limit less what was spent so far. Calls in flight (a
    sibling's) are not taken off: they may give back most of what they hold.
    Children sent the same "left" at once are held together by the parent's
    ledger instead: their spending is charged to it as it happens, and each is
    stopped when it runs out (:func:`exhausted`). None when nothing limits the child.
    """
    left: dict[str, float] = {}
    if own is not None:
        for name in _BUDGET_FIELDS:
            value = getattr(own, name)
            if value is not None:
                left[name] = value
    led = ledger
    while led is not None:
        for name in _BUDGET_FIELDS:
            limit = getattr(led.limits, name)
            if limit is None:
                continue
            if name == "usd":
                free: float = max(0, int(limit * PICO) - led.usd) / PICO
            else:
                free = max(0, limit - getattr(led, name))
            if name not in left or free < left[name]:
                left[name] = free
        led = led.parent
    if not left:
        return None

    def count(name: Resource) -> int | None:
        value = left.get(name)
        return None if value is None else int(value)

    return Budget(
        model_calls=count("model_calls"),
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        tool_calls=count("tool_calls"),
        usd=left.get("usd"),
    )


def read_limits(config: Mapping[str, object] | None) -> tuple[float | None, Budget | None]:
    """A run's timeout and budget from its request's ``config`` (see the module docstring).

    What :meth:`Limits.from_config <deepactors.limits.Limits.from_config>` reads
    of ``configurable``, kept for callers of this name.

    Raises:
        InputError: The key holds something else than limits (a ``ValueError``).
    """
    configurable = (config or {}).get("configurable")
    limits = Limits.from_config({"configurable": configurable})
    return limits.timeout, limits.budget


@dataclass(frozen=True, slots=True, kw_only=True)
class Spent:
    """What a remote child spent, as its parent's ledger counts it (``usd`` in pico-dollars)."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    usd: int = 0

    def __add__(self, other: Spent) -> Spent:
        return Spent(**{n: getattr(self, n) + getattr(other, n) for n in _SPENT_FIELDS})

    def less(self, other: Spent) -> Spent:
        """What this counts beyond ``other``, field by field (never below 0)."""
        return Spent(**{n: max(0, getattr(self, n) - getattr(other, n)) for n in _SPENT_FIELDS})


_SPENT_FIELDS = tuple(f.name for f in fields(Spent))


def recorded(spent: Mapping[str, object], usage: Usage | None) -> Spent:
    """What a remote child's runs spent, from their records.

    Args:
        spent: The ``budget`` reports of the runs' metadata (their model
            calls, tokens, tool calls and dollars), summed, or empty.
        usage: Their usage, for the tokens and dollars when there is no report.
    """
    counts = {name: _count(spent.get(name)) for name in _BUDGET_FIELDS if name != "usd"}
    if not spent and usage is not None:
        counts["model_calls"] = usage.requests
        counts["input_tokens"] = (
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        )
        counts["output_tokens"] = usage.output_tokens
    dollars = spent.get("usd")
    if not isinstance(dollars, int | float) or not dollars > 0:
        dollars = usage.cost_usd if usage is not None and usage.cost_usd else 0.0
    return Spent(**counts, usd=round(float(dollars) * PICO))


def one_call(usage: Usage | None) -> Spent:
    """What one model call a remote child made counts, from its answer's usage."""
    if usage is None:
        return Spent(model_calls=1)
    cost = usage.cost_usd
    return Spent(
        model_calls=1,
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
        usd=round(cost * PICO) if cost is not None and cost > 0 else 0,
    )


def charge(ledger: BudgetLedger | None, spent: Spent) -> None:
    """Charge what a remote child spent to ``ledger`` and every ledger above it."""
    if ledger is not None and spent != _NOTHING:
        ledger.add_spent(
            spent.model_calls, spent.input_tokens, spent.output_tokens, spent.tool_calls, spent.usd
        )


_NOTHING = Spent()


def exhausted(ledger: BudgetLedger, sent: Budget | None, used: Spent) -> Refusal | None:
    """Why a remote child must be stopped now, if it must.

    When a limit of ``ledger`` (or of a ledger above it) is spent, while the
    child's server, sent ``sent`` as its run began, would let it spend more of
    it than ``used`` (what the child spent since): its siblings spent the rest.
    A limit the child's own spending reached needs no stop: its server refuses
    the call past it, and the child ends as ``BudgetExceeded`` there. Tool
    calls count as spent once past their limit (at it, the child's next calls
    would be refused one by one, and it could still answer).
    """
    led: BudgetLedger | None = ledger
    while led is not None:
        for name in _BUDGET_FIELDS:
            limit = getattr(led.limits, name)
            if limit is None:
                continue
            allowed = None if sent is None else getattr(sent, name)
            if name == "usd":
                have, cap = led.usd, int(limit * PICO)
                allowed = None if allowed is None else int(allowed * PICO)
            else:
                have, cap = getattr(led, name), limit
            over = have > cap if name == "tool_calls" else have >= cap
            if over and (allowed is None or getattr(used, name) < allowed):
                if name not in led.exhausted:
                    led.exhausted.append(name)
                return Refusal(
                    resource=name,
                    limit=limit,
                    spent=have / PICO if name == "usd" else have,
                    scope="tree" if led.parent is None else "subagent",
                )
        led = led.parent
    return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

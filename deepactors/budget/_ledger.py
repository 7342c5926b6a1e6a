"""The ledger: limits, reservations and settlements of one actor tree (see the package)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Literal, NamedTuple, final

import anyio

from ..errors import BudgetExceeded, ConfigurationError
from ..messages import Usage

__all__ = [
    "DEFAULT_OUTPUT_RESERVATION",
    "PICO",
    "Budget",
    "BudgetLedger",
    "BudgetReport",
    "Hold",
    "Rates",
    "Refusal",
    "Resource",
]

Resource = Literal["model_calls", "input_tokens", "output_tokens", "tool_calls", "usd"]

Rates = tuple[int, int, int, int]
"""A model's prices per token in pico-dollars (1e-12 $): input, output, cached input,
cache write (:meth:`~deepactors.models.profiles.ModelPrices.per_token_pico`)."""

PICO = 1_000_000_000_000
"""Pico-dollars in a dollar: a ledger counts whole pico-dollars, so sums never drift."""

DEFAULT_OUTPUT_RESERVATION = 4096
"""Output tokens reserved for a call to a model that names no ``max_tokens`` (not
:class:`~deepactors.models.SupportsMaxTokens`, and none in the request's settings).
Such a model is trusted to write no more; the budget's guarantee needs a model
that honours its ``max_tokens``."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits on what a run and every subagent under it may spend. ``None``: no limit.

    Attributes:
        model_calls: Requests to a model (a retried request counts again).
        input_tokens: Prompt tokens, cache reads and writes included.
        output_tokens: Tokens the models write.
        tool_calls: Tool calls run (``task`` calls included).
        usd: US dollars at each model's prices (:mod:`deepactors.models.profiles`);
            a model whose prices are unknown is refused under this limit.

    Raises:
        ConfigurationError: A limit that is not a whole number of 0 or more
            (``usd``: a number of 0 or more).
    """

    model_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int | None = None
    usd: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            kind = int | float if f.name == "usd" else int
            if isinstance(value, bool) or not isinstance(value, kind) or not value >= 0:
                raise ConfigurationError(
                    f"Budget({f.name}=...) must be a {'' if kind is not int else 'whole '}"
                    f"number of 0 or more, not {value!r}"
                )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetReport:
    """What a run spent of its budget (``result["budget"]``).

    Attributes:
        limits: The budget.
        model_calls: Model requests made by the whole tree.
        input_tokens: Input tokens charged (cache reads and writes included).
        output_tokens: Output tokens charged.
        tool_calls: Tool calls run.
        usd: Dollars charged under a ``usd`` limit (else 0.0; ``usage.cost_usd``
            has the tree's cost either way).
        exhausted: The limits that refused a call, if any.
    """

    limits: Budget
    model_calls: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    usd: float = 0.0
    exhausted: tuple[Resource, ...] = ()


@final
class Hold(NamedTuple):
    """A model call's reservation, to settle when the call ends.

    Attributes:
        input_tokens: Input tokens held (the estimate).
        output_tokens: Output tokens held: the call's ``max_tokens``.
        usd: Pico-dollars held: the call's worst-case price (0 without a ``usd`` limit).
        rates: The model's prices the call is charged at, if a ``usd`` limit needs them.
    """

    input_tokens: int
    output_tokens: int
    usd: int = 0
    rates: Rates | None = None


_UNREACHED = 1 << 128  # more than any count of calls or tokens


def _cap(limit: int | None) -> int:
    return _UNREACHED if limit is None else limit


# Hold((a, b)) without the Python-level __new__ of a named tuple: one is made
# for every model call of a budgeted run.
_hold = functools.partial(tuple.__new__, Hold)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a budget refused a call: the limit, and what was spent of it."""

    resource: Resource
    limit: float
    spent: float
    scope: Literal["tree", "subagent"]

    def error(self, what: str) -> BudgetExceeded:
        """The error that stops the actor whose call this was."""
        whose = "the run's budget" if self.scope == "tree" else "this subagent's own budget"
        if self.resource == "usd":
            used = f"${self.spent:.4f} of ${self.limit:.4f}"
        else:
            used = f"{self.spent} of {self.limit} {self.resource.replace('_', ' ')}"
        return BudgetExceeded(
            f"{whose} is spent: {used} used, so {what} was not made",
            resource=self.resource,
            limit=self.limit,
            spent=self.spent,
        )


class BudgetLedger:
    """The running account of one :class:`Budget`: spent, and held by calls in flight.

    Args:
        limits: The budget.
        parent: The ledger of the budget above this one (a subagent's own budget
            sits inside its parent's); every call reserves at every level.
    """

    __slots__ = (
        "_cap_calls",
        "_cap_in",
        "_cap_out",
        "_cap_tools",
        "_cap_usd",
        "_chain",
        "_changed",
        "_held_in",
        "_held_out",
        "_held_usd",
        "exhausted",
        "input_tokens",
        "limits",
        "model_calls",
        "output_tokens",
        "parent",
        "tool_calls",
        "tracks_input",
        "tracks_output",
        "tracks_usd",
        "usd",
    )

    def __init__(self, limits: Budget, *, parent: BudgetLedger | None = None) -> None:
        self.limits = limits
        self.parent = parent
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.tool_calls = 0
        #: Pico-dollars charged.
        self.usd = 0
        self.exhausted: list[Resource] = []
        self._held_in = 0
        self._held_out = 0
        self._held_usd = 0
        self._changed: anyio.Event | None = None
        chain: list[BudgetLedger] = [self]
        while chain[-1].parent is not None:
            chain.append(chain[-1].parent)
        self._chain = tuple(chain)
        # The limits as plain attributes, read on every call; no limit is a number
        # never reached, so no test for None.
        self._cap_calls = _cap(limits.model_calls)
        self._cap_in = _cap(limits.input_tokens)
        self._cap_out = _cap(limits.output_tokens)
        self._cap_tools = _cap(limits.tool_calls)
        # Rounded down: a limit of $0.05 is never passed by a fraction of a pico-dollar.
        self._cap_usd = _UNREACHED if limits.usd is None else int(limits.usd * PICO)
        #: Whether any level limits dollars / input / output tokens (else nothing is
        #: estimated). Dollars need both token counts, and every model's prices.
        self.tracks_usd = usd = any(led.limits.usd is not None for led in chain)
        self.tracks_input = usd or any(led.limits.input_tokens is not None for led in chain)
        self.tracks_output = usd or any(led.limits.output_tokens is not None for led in chain)

    def __repr__(self) -> str:
        return (
            f"<BudgetLedger calls={self.model_calls} in={self.input_tokens} "
            f"out={self.output_tokens} tools={self.tool_calls} usd={self.usd / PICO:.6f} "
            f"of {self.limits}>"
        )

    # -- model calls ---------------------------------------------------------------

    def try_reserve(
        self, input_tokens: int, output_tokens: int, rates: Rates | None = None
    ) -> Hold | Refusal | anyio.Event:
        """Reserve one model call, or say why not.

        Args:
            input_tokens: The request's estimated input tokens.
            output_tokens: The ``max_tokens`` the call would be made with.
            rates: The model's prices per token, in pico-dollars; needed when
                :attr:`tracks_usd` (a call without them is refused then).

        Returns:
            A :class:`Hold` (reserved; its ``output_tokens`` may be less than asked:
            the call must then be made with that ``max_tokens``); a :class:`Refusal`
            when the budget can never cover the call; or an event to wait on when
            it would fit once calls in flight have settled.
        """
        if rates is None:
            if self.tracks_usd:
                return self._refuse_unpriced()
            in_price = out_price = 0
        else:
            in_price, out_price = max(rates[0], rates[2], rates[3]), rates[1]
        in_cost = input_tokens * in_price
        if self.parent is None and self._fits_outright(
            input_tokens, output_tokens, in_cost, out_price
        ):
            # What the pass below would grant, without it (the common case, far
            # from the limits; this runs before every model call of a budgeted tree).
            grant = output_tokens
        else:
            found = self._grant(input_tokens, output_tokens, in_cost, out_price)
            if not isinstance(found, int):
                return found
            grant = found
        cost = in_cost + grant * out_price
        for led in self._chain:
            led.model_calls += 1
            led._held_in += input_tokens
            led._held_out += grant
            led._held_usd += cost
        return _hold((input_tokens, grant, cost, rates))

    def _fits_outright(
        self, input_tokens: int, output_tokens: int, in_cost: int, out_price: int
    ) -> bool:
        """Whether the call fits whole beside the calls in flight (this level only)."""
        return (
            self.model_calls < self._cap_calls
            and self.input_tokens + self._held_in + input_tokens <= self._cap_in
            # (or 1: a call for no output still needs some left, as below)
            and self.output_tokens + self._held_out + (output_tokens or 1) <= self._cap_out
            and self.usd + self._held_usd + in_cost + (output_tokens or 1) * out_price
            <= self._cap_usd
        )

    def _grant(
        self, input_tokens: int, output_tokens: int, in_cost: int, out_price: int
    ) -> int | Refusal | anyio.Event:
        """One pass over the levels (this budget and those above it).

        Finds what can never fit (a refusal), the output grant (the least left
        anywhere), and the level where calls in flight hold what this call
        needs (its event to wait on).
        """
        grant = room = output_tokens
        waits: BudgetLedger | None = None
        tight = self
        for led in self._chain:
            if led.model_calls >= led._cap_calls:
                return led._refuse("model_calls", led._cap_calls, led.model_calls)
            spent = led.input_tokens + input_tokens
            if spent > led._cap_in:
                return led._refuse("input_tokens", led._cap_in, led.input_tokens)
            if waits is None and spent + led._held_in > led._cap_in:
                waits = led
            left = led._cap_out - led.output_tokens
            if left < 1:
                return led._refuse("output_tokens", led._cap_out, led.output_tokens)
            if left < grant:
                grant = left
            left -= led._held_out  # free beside the calls in flight
            if left < room:
                room, tight = left, led
            if led.limits.usd is None:
                continue
            # Dollars: what is left after the input's price buys output tokens.
            money = led._cap_usd - led.usd - in_cost
            if money < out_price or money < 0:
                return led._refuse_usd()
            if out_price:
                if money // out_price < grant:
                    grant = money // out_price
                free = (money - led._held_usd) // out_price
                if free < room:
                    room, tight = free, led
            elif waits is None and money - led._held_usd < 0:
                waits = led
        if waits is None and grant > room:
            waits = tight  # the grant fits under every limit, not beside the holds
        if waits is not None:
            return waits.changed()
        return grant

    def _refuse_unpriced(self) -> Refusal:
        return next(led for led in self._chain if led.limits.usd is not None)._refuse_usd()

    def _refuse_usd(self) -> Refusal:
        return self._refuse("usd", self._cap_usd / PICO, self.usd / PICO)

    def changed(self) -> anyio.Event:
        """An event set the next time spending here changes: a call settles, or
        :meth:`add_spent` charges. (A call that had to wait fits once calls in
        flight settle: they hold what it needs.)"""
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def settle(self, hold: Hold, usage: Usage | None, *, charge: bool = True) -> None:
        """End a call's reservation, charging what it really used.

        Args:
            hold: The reservation.
            usage: The usage the model reported. ``None`` charges the whole
                reservation (a call cut off, or a model that reports nothing).
            charge: ``False`` charges no tokens (the provider refused the request).
        """
        held_in, held_out, held_usd, rates = hold
        if usage is not None and charge:
            used_in = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
            used_out = usage.output_tokens
            used_usd = 0
            if rates is not None:
                used_usd = (
                    usage.input_tokens * rates[0]
                    + usage.output_tokens * rates[1]
                    + usage.cache_read_tokens * rates[2]
                    + usage.cache_write_tokens * rates[3]
                )
        elif charge:
            used_in, used_out, used_usd = held_in, held_out, held_usd
        else:
            used_in = used_out = used_usd = 0
        for led in self._chain:
            led._held_in -= held_in
            led._held_out -= held_out
            led._held_usd -= held_usd
            led.input_tokens += used_in
            led.output_tokens += used_out
            led.usd += used_usd
            changed = led._changed
            if changed is not None:
                led._changed = None
                changed.set()

    def add_spent(
        self, model_calls: int, input_tokens: int, output_tokens: int, tool_calls: int, usd: int
    ) -> None:
        """Charge spending made elsewhere (a remote child's) here and at every level above.

        No reservation: these calls were made already. ``usd`` is in pico-dollars.
        Whoever waits on :meth:`changed` is woken (a call waiting for room
        finds none more, and asks again; a remote child sees what is left).
        """
        for led in self._chain:
            led.model_calls += model_calls
            led.input_tokens += input_tokens
            led.output_tokens += output_tokens
            led.tool_calls += tool_calls
            led.usd += usd
            changed, led._changed = led._changed, None
            if changed is not None:
                changed.set()

    # -- tool calls ----------------------------------------------------------------

    def take_tool_call(self) -> Refusal | None:
        """Count one tool call, or return why the budget refuses it."""
        for led in self._chain:
            if led.tool_calls >= led._cap_tools:
                return led._refuse("tool_calls", led._cap_tools, led.tool_calls)
        for led in self._chain:
            led.tool_calls += 1
        return None

    # -- reports -------------------------------------------------------------------

    def report(self) -> BudgetReport:
        """What has been spent so far (calls in flight not included)."""
        return BudgetReport(
            limits=self.limits,
            model_calls=self.model_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            tool_calls=self.tool_calls,
            usd=self.usd / PICO,
            exhausted=tuple(self.exhausted),
        )

    def _refuse(self, resource: Resource, limit: float, spent: float) -> Refusal:
        if resource not in self.exhausted:
            self.exhausted.append(resource)
        scope: Literal["tree", "subagent"] = "tree" if self.parent is None else "subagent"
        return Refusal(resource=resource, limit=limit, spent=spent, scope=scope)

"""A run's limits in one vocabulary: its time, its model calls and its budget.

Every road a run is asked for reads them here, once: the facade's keywords
(``timeout=``, ``budget=``) and LangGraph's ``config`` (``recursion_limit``),
a server request's ``config`` (``recursion_limit``, and the limits a remote
parent sent under ``configurable.deepactors_limits``), and a remote parent
writing that entry for its child. One rule each:

- ``timeout``: seconds for the whole run, a number >= 0 (``inf``: none), or None.
- ``recursion_limit``: LangGraph's steps, an integer >= 2; one agent turn is
  two steps (the model, then the tools), so it allows ``recursion_limit // 2``
  model calls to each agent of the run's tree (:attr:`Limits.max_steps`).
- ``budget``: a :class:`~deepactors.budget.Budget`, or on the wire an object of
  its fields.
- ``interrupt_before`` / ``interrupt_after``: the nodes a run stops at
  (:class:`Breakpoints`): ``"model"``, ``"tools"``, or ``"*"`` for both, as one
  name or a list (LangGraph's names for a deep agent's nodes).

A value that breaks its rule is an :class:`~deepactors.errors.InputError` that
names it, before anything runs (a server answers it with a 422).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import cast, final

from ._core.jsonvalue import JSONObject
from .budget import Budget
from .errors import ConfigurationError, InputError

__all__ = [
    "LIMITS_KEY",
    "NODES",
    "NO_BREAKPOINTS",
    "NO_LIMITS",
    "Breakpoints",
    "Limits",
    "breakpoints",
    "nodes",
    "seconds",
    "steps",
    "ttl_seconds",
]

LIMITS_KEY = "deepactors_limits"
"""The key of ``config.configurable`` that carries a run's limits to another server."""

_BUDGET_FIELDS = tuple(f.name for f in fields(Budget))


def seconds(value: object, *, what: str = "timeout") -> float | None:
    """A run's timeout: None, or seconds >= 0 (``inf`` reads as None: no deadline).

    Raises:
        InputError: Not a number (a bool, NaN), or below 0; the message names ``what``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InputError(f"{what} must be a number of seconds >= 0 or None, not {value!r}")
    return None if value == math.inf else float(value)


def ttl_seconds(minutes: object, *, what: str = "ttl") -> float | None:
    """A time to live given in minutes (the SDKs', ``langgraph.json``'s, ``serve``'s
    unit), in seconds: None, or a finite number of minutes above 0.

    Raises:
        InputError: Not a number (a bool, NaN), 0 or less, or infinite; the
            message names ``what``.
    """
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, int | float):
        raise InputError(f"{what}: minutes (a number above 0), not {minutes!r}")
    if not 0 < minutes < math.inf:
        raise InputError(f"{what}: minutes above 0, not {minutes!r}")
    return float(minutes) * 60


def steps(recursion_limit: object, *, what: str = "recursion_limit") -> int | None:
    """The model calls each agent may make under LangGraph's ``recursion_limit`` (None: none).

    Raises:
        InputError: Not an integer >= 2; the message names ``what``.
    """
    if recursion_limit is None:
        return None
    if (
        isinstance(recursion_limit, bool)
        or not isinstance(recursion_limit, int)
        or recursion_limit < 2
    ):
        raise InputError(f"{what} must be an integer >= 2, not {recursion_limit!r}")
    return recursion_limit // 2


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """A run's limits, each checked by its rule (see the module docstring).

    Attributes:
        timeout: Seconds for the run, its subagents and its wait in the
            thread's queue included (None: no deadline).
        max_steps: Model calls allowed to each agent of the run's tree (None:
            each agent's own ``max_steps``).
        budget: What the run and every subagent under it may spend together.
    """

    timeout: float | None = None
    max_steps: int | None = None
    budget: Budget | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", seconds(self.timeout))
        if self.max_steps is not None and (
            isinstance(self.max_steps, bool)
            or not isinstance(self.max_steps, int)
            or self.max_steps < 1
        ):
            raise InputError(f"max_steps must be an integer >= 1, not {self.max_steps!r}")
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise InputError(
                f"budget must be a deepactors.Budget, not {type(self.budget).__name__}"
            )

    @classmethod
    def of(
        cls, *, timeout: object = None, recursion_limit: object = None, budget: Budget | None = None
    ) -> Limits:
        """The limits a caller gave: keywords, and LangGraph's ``recursion_limit``.

        Raises:
            InputError: A value breaks its rule; the message names it.
        """
        return cls(
            timeout=seconds(timeout),
            max_steps=steps(recursion_limit),
            budget=budget,  # a caller's mistake (not a Budget) is said in __post_init__
        )

    @classmethod
    def from_config(cls, config: Mapping[str, object] | None) -> Limits:
        """The limits a run request's ``config`` carries (a server's run).

        ``recursion_limit``, and the timeout and budget a remote parent sent
        under ``configurable.deepactors_limits`` (:meth:`configurable`).

        Raises:
            InputError: A value breaks its rule; the message names where it is
                (``config.configurable.deepactors_limits.timeout: ...``).
        """
        if not config:  # what most requests send
            return NO_LIMITS
        max_steps = steps(config.get("recursion_limit"), what="config.recursion_limit")
        configurable = config.get("configurable")
        if not isinstance(configurable, Mapping) or LIMITS_KEY not in configurable:
            return NO_LIMITS if max_steps is None else cls(max_steps=max_steps)
        where = f"config.configurable.{LIMITS_KEY}"
        sent = configurable[LIMITS_KEY]
        if not isinstance(sent, Mapping):
            raise InputError(f"{where}: an object with 'timeout' and/or 'budget', not {sent!r}")
        unknown = set(sent) - {"timeout", "budget"}
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        timeout = seconds(sent.get("timeout"), what=f"{where}.timeout")
        return cls(timeout=timeout, max_steps=max_steps, budget=_budget(sent.get("budget"), where))

    def configurable(self) -> JSONObject:
        """The ``config.configurable`` entry that sends the timeout and budget (empty: none).

        What a remote parent sends its child's server, which reads it back
        with :meth:`from_config`.
        """
        sent: JSONObject = {}
        if self.timeout is not None:
            sent["timeout"] = self.timeout
        if self.budget is not None:
            sent["budget"] = {
                name: getattr(self.budget, name)
                for name in _BUDGET_FIELDS
                if getattr(self.budget, name) is not None
            }
        return {LIMITS_KEY: sent} if sent else {}


NO_LIMITS = Limits()
"""No limit of the run's own (each agent's ``max_steps`` holds)."""


def _budget(raw: object, where: str) -> Budget | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not set(raw) <= set(_BUDGET_FIELDS):
        known = ", ".join(_BUDGET_FIELDS)
        raise InputError(f"{where}.budget: an object with some of {known}, not {raw!r}")
    try:
        return Budget(**raw)
    except ConfigurationError as exc:
        raise InputError(f"{where}.budget: {exc}") from None


NODES = ("model", "tools")
"""The nodes of a deep agent's loop a run can stop before or after (LangGraph's names)."""


def nodes(value: object, *, what: str = "interrupt_before") -> frozenset[str]:
    """The nodes ``value`` names: None (none), ``"*"`` (all), a name, or a list of them.

    Raises:
        InputError: Not a name or a list of names, or a name that is not a node;
            the message names ``what`` and the valid names.
    """
    if value is None:
        return frozenset()
    names: tuple[object, ...]
    if isinstance(value, str):
        names = (value,)
    elif isinstance(value, list | tuple | set | frozenset):
        names = tuple(value)
    else:
        raise InputError(f"{what} must be a node name or a list of them, not {value!r}")
    if "*" in names:
        return frozenset(NODES)
    unknown = [n for n in names if n not in NODES]
    if unknown:
        valid = ", ".join(repr(n) for n in NODES)
        raise InputError(
            f"{what}: unknown node(s) {', '.join(repr(n) for n in unknown)}; a deep agent's "
            f"nodes are {valid} (or '*' for all)"
        )
    return frozenset(cast(tuple[str, ...], names))


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Breakpoints:
    """Where a run stops for a look before it goes on (LangGraph's static breakpoints).

    A deep agent's loop alternates two nodes, ``model`` and ``tools``; a run
    stops before a node named in ``before`` is about to run, and after a node
    named in ``after`` ran, with the thread saved there. Input ``None`` (or a
    ``Command(resume=...)``) continues it past that point.

    Attributes:
        before: The nodes to stop before.
        after: The nodes to stop after.
    """

    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.before or self.after)

    def over(self, interrupt_before: object, interrupt_after: object) -> Breakpoints:
        """A run's breakpoints: each list it gives (checked) instead of this one's.

        As LangGraph's ``interrupt_before=`` on a call of a compiled graph: the
        graph's own list holds where the call gives none (None), and ``[]``
        stops nowhere.

        Raises:
            InputError: See :func:`nodes`.
        """
        return Breakpoints(
            before=self.before
            if interrupt_before is None
            else nodes(interrupt_before, what="interrupt_before"),
            after=self.after
            if interrupt_after is None
            else nodes(interrupt_after, what="interrupt_after"),
        )

    def stops(self, *, ran: str | None, next: str | None) -> bool:
        """Whether a run stops between the node that ``ran`` and the ``next`` one."""
        return (ran is not None and ran in self.after) or (next is not None and next in self.before)


NO_BREAKPOINTS = Breakpoints()
"""A run that stops nowhere of its own accord."""


def breakpoints(interrupt_before: object = None, interrupt_after: object = None) -> Breakpoints:
    """The breakpoints a caller gave, each list checked (see :func:`nodes`).

    Raises:
        InputError: An unknown node or a value that is not a list of names.
    """
    return Breakpoints(
        before=nodes(interrupt_before, what="interrupt_before"),
        after=nodes(interrupt_after, what="interrupt_after"),
    )

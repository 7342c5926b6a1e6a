"""Charging a remote child's spending to its parent's ledger as its run reports it.

A deepactors server streams a run's events (``events-lite``): each model call
that answered (``model_call_finished``, with its usage) and each tool call
that ran (``tool_call_finished``), under the run's root and its subagents
alike. :class:`Meter` charges each to the parent's
:class:`~deepactors.budget.BudgetLedger` as it comes, whoever listens to the
parent's events, so the child's siblings (local or remote) see it at once;
and :meth:`Meter.exhausted` returns when the ledger has run out while the
child's server would still let it spend (it was sent what was left when its
run began, and siblings spent it meanwhile): the child is then stopped.

Events can be missed (a model call that failed reports none; a stream can
break): at the child's end the runs' records say what they spent, and only
what the live charges did not cover is charged then (:meth:`Meter.spent`).
LangGraph's server streams no such events, and is not metered.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._core.jsonvalue import JSONValue
from ..budget import Budget, BudgetLedger, Refusal
from ..messages import Usage
from ._limits import Spent, charge, exhausted, one_call

__all__ = ["Meter"]

_ONE_TOOL_CALL = Spent(tool_calls=1)


class Meter:
    """The live account of one remote child's spending on its parent's ledger.

    Args:
        ledger: The parent's ledger.
    """

    __slots__ = ("_began", "_ledger", "_sent", "refusal", "spent", "usage")

    def __init__(self, ledger: BudgetLedger) -> None:
        self._ledger = ledger
        #: Charged so far, every run of the child together.
        self.spent = Spent()
        #: The usage the charged model calls reported (the parent's, should
        #: the runs' records be lost).
        self.usage: Usage | None = None
        #: Why the child was stopped: the ledger ran out (None: it was not).
        self.refusal: Refusal | None = None
        self._began = Spent()
        self._sent: Budget | None = None

    def begin(self, sent: Budget | None) -> None:
        """A run of the child begins, sent ``sent`` to spend."""
        self._began, self._sent = self.spent, sent

    def part(self, mode: str, data: JSONValue) -> None:
        """One part of the run's stream: charged if it reports spending."""
        if mode not in ("events", "events-lite") or not isinstance(data, Mapping):
            return
        match data.get("event"):
            case "model_call_finished":
                message = data.get("message")
                raw = message.get("usage") if isinstance(message, Mapping) else None
                usage = None
                if isinstance(raw, Mapping):
                    try:
                        usage = Usage.model_validate(raw)
                    except ValueError:
                        usage = None  # (counted as a call; its tokens come with the record)
                if usage is not None:
                    self.usage = usage if self.usage is None else self.usage + usage
                self._charge(one_call(usage))
            case "tool_call_finished":
                # Not a call its server's budget refused (nor one that failed:
                # its record says whether it ran): live charges must never
                # exceed what the record says, as nothing is given back.
                result = data.get("result")
                if isinstance(result, Mapping) and result.get("status") == "success":
                    self._charge(_ONE_TOOL_CALL)
            case _:
                pass

    def _charge(self, spent: Spent) -> None:
        self.spent += spent
        charge(self._ledger, spent)  # (wakes every child's exhausted())

    async def exhausted(self) -> None:
        """Return once the child must stop: the ledger ran out (:attr:`refusal` says how).

        Woken whenever spending anywhere in the tree changes: every ledger's
        spending is charged at the root too, where this waits.
        """
        root = self._ledger
        while root.parent is not None:
            root = root.parent
        while True:
            changed = root.changed()
            refusal = exhausted(self._ledger, self._sent, self.spent.less(self._began))
            if refusal is not None:
                self.refusal = refusal
                return
            await changed.wait()

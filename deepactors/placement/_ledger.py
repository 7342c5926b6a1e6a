"""A tree's budget across processes: the ledger stays with the parent, children ask it.

The tree's :class:`~deepactors.budget.BudgetLedger` lives in the parent's
process, where the parent's own calls and its local children reserve from it as
always. A child on a Ray worker draws through a :class:`WorkerLedger`: its
runtime asks it before each model call exactly as it asks a local ledger
(``try_reserve``, then ``settle``), and it forwards each request to the parent
(:class:`~._wire.Reserve`), whose ledger answers with a grant or a refusal; until
the answer comes back the call waits on the event ``try_reserve`` returned, as
for a reservation that waits for room. So the limits hold over every worker as
they hold in one process: no call is made without its worst case reserved in
the one ledger, which never overshoots.

Tool calls are counted on the parent's ledger after the fact; a ``tool_calls``
limit is checked on the worker against what was left at the child's last
answer from the parent, so children on several workers may together pass it by
the calls they make meanwhile (model calls, tokens and dollars never).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ..budget import Budget, BudgetLedger, Hold, Rates, Refusal
from ..messages import Usage
from ._wire import Charged, Report, Reserve, Settle, Tools, ToolsLeft

__all__ = ["WorkerLedger"]

_Key = tuple[int, int, Rates | None]


class WorkerLedger(BudgetLedger):
    """One child's draw, on a worker, on its parent's ledger (see the module docstring).

    Args:
        cid: The child's number on its link.
        send: Sends a report to the parent (batched by the worker).
        send_now: Sends a report a call waits for (it ends the batch).
        tracks: Whether the parent's ledgers limit input tokens, output
            tokens, dollars (what a reservation must estimate).
        tools: Tool calls left at the parent, and the limit (None: no limit).
    """

    __slots__ = (
        "_answers",
        "_asked",
        "_cid",
        "_held",
        "_next",
        "_send",
        "_send_now",
        "_tools",
        "_waits",
    )

    def __init__(
        self,
        cid: int,
        send: Callable[[Report], None],
        send_now: Callable[[Report], None],
        tracks: tuple[bool, bool, bool],
        tools: ToolsLeft,
    ) -> None:
        super().__init__(Budget())
        self.tracks_input, self.tracks_output, self.tracks_usd = tracks
        self._cid = cid
        self._send = send
        self._send_now = send_now
        self._tools = tools
        self._next = 0
        self._asked: dict[int, _Key] = {}  # request id -> what it asked
        self._waits: dict[_Key, anyio.Event] = {}  # one request in flight per key
        self._answers: dict[_Key, list[Hold | Refusal]] = {}
        self._held: dict[int, int] = {}  # id(hold) -> its request id, until settled

    def try_reserve(
        self, input_tokens: int, output_tokens: int, rates: Rates | None = None
    ) -> Hold | Refusal | anyio.Event:
        """A grant or refusal from the parent, or the event to wait on for one.

        Two calls asking the same may share a request in flight: answers are
        interchangeable between them, and the second asks again if the first
        took the only one.
        """
        key = (input_tokens, output_tokens, rates)
        ready = self._answers.get(key)
        if ready:
            answer = ready.pop(0)
            if not ready:
                del self._answers[key]
            return answer
        wait = self._waits.get(key)
        if wait is None:
            self._next += 1
            rid = self._next
            self._asked[rid] = key
            self._waits[key] = wait = anyio.Event()
            self._send_now(Reserve(self._cid, rid, input_tokens, output_tokens, rates))
        return wait

    def answer(self, rid: int, answer: Hold | Refusal, tools: ToolsLeft) -> bool:
        """The parent answered request ``rid``; False when nobody asked it (any more)."""
        self._tools = tools
        key = self._asked.pop(rid, None)
        if key is None:
            return False
        if isinstance(answer, Hold):
            self._held[id(answer)] = rid
        self._answers.setdefault(key, []).append(answer)
        wait = self._waits.pop(key, None)
        if wait is not None:
            wait.set()
        return True

    def settle(self, hold: Hold, usage: Usage | None, *, charge: bool = True) -> None:
        """End a reservation: the parent's ledger is charged what the call used."""
        rid = self._held.pop(id(hold), None)
        if rid is not None:
            self._send(Settle(self._cid, rid, usage, charge))

    def take_tool_call(self) -> Refusal | None:
        """Count a tool call (see the module docstring for what a limit here means)."""
        tools = self._tools
        if tools is not None:
            left, limit = tools
            if left <= 0:
                return Refusal(resource="tool_calls", limit=limit, spent=limit, scope="tree")
            self._tools = (left - 1, limit)
        self._send(Tools(self._cid, 1))
        return None

    def add_spent(
        self, model_calls: int, input_tokens: int, output_tokens: int, tool_calls: int, usd: int
    ) -> None:
        """Spending made elsewhere under this child (a remote subagent of its own)."""
        self._send(Charged(self._cid, model_calls, input_tokens, output_tokens, tool_calls, usd))

    def close(self) -> None:
        """The child ended: grants it never used go back to the parent, unspent."""
        for answers in self._answers.values():
            for answer in answers:
                rid = self._held.pop(id(answer), None)
                if rid is not None:
                    self._send(Settle(self._cid, rid, None, False))
        self._answers.clear()

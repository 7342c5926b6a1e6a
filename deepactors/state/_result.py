"""A run's result: its final state, typed, and still the dict deepagents scripts index."""

from __future__ import annotations

from typing import Any, Generic, final

from typing_extensions import TypeVar

from ..budget import BudgetReport
from ..filediff import FileRecord
from ..interrupts import PendingRequest
from ..messages import Message, Usage
from ._state import Todo

__all__ = ["AgentResult", "ResponseT"]

ResponseT = TypeVar("ResponseT", default=Any)
"""The type of a run's ``structured_response`` (its agent's ``response_format``)."""


@final
class AgentResult(dict[str, Any], Generic[ResponseT]):
    """What a run ends with: every channel of its state, and what the run spent.

    Read as attributes (``result.messages``, ``result.structured_response``),
    or as the dict a deepagents script indexes (``result["messages"]``,
    ``"__interrupt__" in result``, ``result.get("files")``): it is one.
    ``AgentResult[Report]`` types the ``structured_response`` of an agent made
    with ``response_format=Report``.

    Keys: every channel (``messages``, ``todos``, ``files``,
    ``structured_response`` and any a middleware declares), ``usage``,
    ``budget``, and ``__interrupt__`` when the run stopped for human decisions.
    """

    __slots__ = ()

    @property
    def messages(self) -> list[Message]:
        """The conversation, oldest first (the last one is the answer)."""
        messages: list[Message] = self.get("messages", [])
        return messages

    @property
    def files(self) -> dict[str, FileRecord]:
        """The files in the agent's state, by path."""
        files: dict[str, FileRecord] = self.get("files", {})
        return files

    @property
    def todos(self) -> list[Todo]:
        """The agent's todo list as it left it."""
        todos: list[Todo] = self.get("todos", [])
        return todos

    @property
    def structured_response(self) -> ResponseT | None:
        """The answer in the agent's ``response_format``, if it has one."""
        response: ResponseT | None = self.get("structured_response")
        return response

    @property
    def usage(self) -> Usage | None:
        """The tokens (and cost) the run and every subagent under it spent."""
        usage: Usage | None = self.get("usage")
        return usage

    @property
    def budget(self) -> BudgetReport | None:
        """What the run spent of its budget, and which limits refused a call (None: none)."""
        report: BudgetReport | None = self.get("budget")
        return report

    @property
    def interrupts(self) -> list[PendingRequest]:
        """The requests the run stopped for, waiting for human decisions (empty: none)."""
        pending: list[PendingRequest] = self.get("__interrupt__", [])
        return pending

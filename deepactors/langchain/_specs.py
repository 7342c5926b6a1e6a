"""deepagents' dict types, so ``SubAgent(...)`` / ``CompiledSubAgent(...)`` port, and
``DeepAgentState`` to extend for ``create_deep_agent(state_schema=...)``.

Plain ``TypedDict``: calling one builds the dict ``create_deep_agent(subagents=...)``
reads. Needs nothing from LangChain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

__all__ = ["CompiledSubAgent", "DeepAgentState", "SubAgent"]


class DeepAgentState(TypedDict):
    """The keys every agent's state has: deepagents' ``DeepAgentState``.

    Subclass it with keys of your own and pass the class as
    ``create_deep_agent(state_schema=...)``: each new key becomes a channel.
    """

    messages: list[Any]
    todos: NotRequired[list[Any]]
    files: NotRequired[dict[str, Any]]
    structured_response: NotRequired[Any]


class SubAgent(TypedDict):
    """A declarative subagent: deepagents' ``SubAgent`` (see ``create_deep_agent``)."""

    name: str
    description: str
    system_prompt: str
    tools: NotRequired[Sequence[Any]]
    model: NotRequired[Any]
    middleware: NotRequired[Sequence[Any]]
    interrupt_on: NotRequired[Mapping[str, Any]]
    skills: NotRequired[Sequence[str]]
    response_format: NotRequired[Any]


class CompiledSubAgent(TypedDict):
    """A prebuilt agent as a subagent: deepagents' ``CompiledSubAgent``.

    ``runnable`` is an agent from ``create_deep_agent``.
    """

    name: str
    description: str
    runnable: Any

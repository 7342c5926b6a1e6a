"""The parts of an agent, as attributes of the facade (``agent.model``, ``agent.tools``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..actors import AgentSpec
from ..hooks import AgentMiddleware
from ..models import ChatModel
from ..tools import Tool

if TYPE_CHECKING:
    from ..backends import Backend
    from ..persistence import Checkpointer, Store

__all__ = ["AgentParts"]


class AgentParts:
    """Read-only views of an agent's resolved parts (mixed into ``DeepAgent``)."""

    __slots__ = ("_spec",)

    def __init__(self, spec: AgentSpec) -> None:
        self._spec = spec

    def __repr__(self) -> str:
        s = self._spec
        return (
            f"<DeepAgent {s.name!r} model={s.model.model_name!r} tools={len(s.tools)} "
            f"middleware={[mw.name for mw in s.middleware]}>"
        )

    @property
    def spec(self) -> AgentSpec:
        """The agent's resolved parts, as the runtime runs them."""
        return self._spec

    @property
    def name(self) -> str:
        """The agent's name, also the root of its actor paths."""
        return self._spec.name

    @property
    def model(self) -> ChatModel:
        """The model the agent calls."""
        return self._spec.model

    @property
    def tools(self) -> Mapping[str, Tool]:
        """Every tool the model sees, by name."""
        return self._spec.tools

    @property
    def system_prompt(self) -> str | None:
        """The full system prompt, middleware sections included."""
        return self._spec.system_prompt

    @property
    def middleware(self) -> Sequence[AgentMiddleware]:
        """The middleware stack, outermost first."""
        return self._spec.middleware

    @property
    def backend(self) -> Backend | None:
        """Where the file tools keep files."""
        return self._spec.backend

    @property
    def store(self) -> Store | None:
        """The long-term store, if any."""
        return self._spec.store

    @property
    def checkpointer(self) -> Checkpointer | None:
        """Where threads are saved, if anywhere."""
        return self._spec.checkpointer

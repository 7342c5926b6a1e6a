"""The agent facade: :class:`DeepAgent`, what :func:`~deepactors.create_deep_agent` returns."""

from __future__ import annotations

from ._agent import AgentInput as AgentInput
from ._agent import DeepAgent as DeepAgent

__all__ = ["AgentInput", "DeepAgent"]

"""The agent facade: :class:`DeepAgent`, what :func:`~deepactors.create_deep_agent` returns."""

from __future__ import annotations

from .._core.public import publish as _publish
from ._agent import AgentInput as AgentInput
from ._agent import DeepAgent as DeepAgent
from ._target import import_from as import_from
from ._target import load_target as load_target

__all__ = ["AgentInput", "DeepAgent", "import_from", "load_target"]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

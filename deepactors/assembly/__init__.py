"""Assembly: an agent tree built from what a user gives, resolved once.

:func:`create_deep_agent` takes a model, tools, subagents and the rest, builds the
default middleware stack and each subagent's spec, and returns a
:class:`~deepactors.agent.DeepAgent` around the resolved
:class:`~deepactors.actors.AgentSpec`. Its parts live beside it: ``_options``
(deepactors' own keywords, typed, and their defaults), ``_assemble`` (the call's
arguments built into the tree), ``_parts`` (the settings a tree shares, tool
sources, the structured-answer layer, the spec assembly), ``_subagent_config``
(subagent dicts checked by a pydantic model; it sits here, above ``agent``,
because a subagent may be a compiled ``DeepAgent``).
:mod:`deepactors.assembly.demo` is the offline demo, an agent assembled so.

* :func:`create_deep_agent` (also ``from deepactors import create_deep_agent``).
* :class:`AgentOptions`: its keywords that deepagents does not have (``max_steps``,
  ``placement``...), typed for ``**options``.
* :data:`DEFAULT_PROMPT`: the system prompt used when none is given.
* :func:`schema_channels`: the channels a ``state_schema`` (a ``TypedDict``) adds.
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._factory import create_deep_agent as create_deep_agent
from ._options import AgentOptions as AgentOptions
from ._parts import DEFAULT_PROMPT as DEFAULT_PROMPT
from ._parts import schema_channels as schema_channels

__all__ = ["DEFAULT_PROMPT", "AgentOptions", "create_deep_agent", "schema_channels"]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

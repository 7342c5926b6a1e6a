"""A2A (Agent2Agent): assistants served to other vendors' agents (``a2a-sdk``, ``@a2a-js/sdk``).

``deepactors serve`` (``create_app``) serves each assistant's agent card at
``/a2a/{assistant_id}/.well-known/agent-card.json`` and A2A 1.0's JSON-RPC
methods at ``/a2a/{assistant_id}``. See ``docs/a2a.md``.
"""

from __future__ import annotations

from ..._core.public import publish as _publish
from ._endpoint import a2a_routes as a2a_routes
from ._wire import PROTOCOL_VERSION as PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION"]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

"""The Agent Client Protocol: an agent for Zed, JetBrains and other editors (ACP).

``deepactors acp module:agent`` runs the agent as an ACP agent over stdio; an
editor starts it and talks to it. Sessions are threads (loaded again from the
checkpointer), prompt turns stream the agent's text, reasoning, tool calls
(with their kinds and locations) and plan; a tool in ``interrupt_on`` asks the
editor's permission; the file tools read and write through the editor's
buffers, and ``execute`` runs in its terminal, when the editor offers them.
See ``docs/acp.md``.
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._agent import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._agent import AcpAgent as AcpAgent
from ._backend import ClientOffers as ClientOffers
from ._backend import EditorBackend as EditorBackend
from ._stdio import serve_acp as serve_acp

__all__ = ["PROTOCOL_VERSION", "AcpAgent", "ClientOffers", "EditorBackend", "serve_acp"]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

"""The Vercel AI SDK's UI message stream: assistants for ``useChat`` (``@ai-sdk/react``).

``deepactors serve`` (``create_app``) answers ``POST /ai-sdk/{assistant_id}``:
give it to ``useChat``'s ``DefaultChatTransport`` as its ``api``. See
``docs/ai-sdk.md``.
"""

from __future__ import annotations

from ..._core.public import publish as _publish
from ._endpoint import aisdk_routes as aisdk_routes
from ._events import HEADERS as HEADERS

__all__ = ["HEADERS"]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

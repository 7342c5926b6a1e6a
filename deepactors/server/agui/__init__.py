"""AG-UI: assistants for CopilotKit and other AG-UI frontends (``@ag-ui/client``).

``deepactors serve`` (``create_app``) answers ``POST /agui/{assistant_id}``:
give its URL to ``HttpAgent``. :func:`agui_app` is one agent as an ASGI app
answering AG-UI at its root, to mount in an app of one's own. See ``docs/agui.md``.
"""

from __future__ import annotations

from ..._core.public import publish as _publish
from ._app import agui_app as agui_app
from ._endpoint import agui_routes as agui_routes
from ._events import PROTOCOL_VERSION as PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION", "agui_app"]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

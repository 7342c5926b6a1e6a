"""AG-UI: assistants for CopilotKit and other AG-UI frontends (``@ag-ui/client``).

``deepactors serve`` (``create_app``) answers ``POST /agui/{assistant_id}``:
give its URL to ``HttpAgent``. See ``docs/agui.md``.
"""

from __future__ import annotations

from ._endpoint import agui_routes as agui_routes
from ._events import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._events import AguiTranslator as AguiTranslator

__all__ = ["PROTOCOL_VERSION", "AguiTranslator", "agui_routes"]

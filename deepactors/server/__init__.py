"""Serve agents over HTTP on the LangGraph Agent Protocol (Starlette; uvicorn or hypercorn).

::

    from deepactors.server import create_app

    app = create_app({"agent": agent})      # any ASGI server: uvicorn, hypercorn (trio)

``langgraph-sdk`` (``get_client(url=...)``), Agent Chat UI and deep-agents-ui
talk to it unchanged. See :func:`create_app`.
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._app import create_app as create_app
from ._options import AppOptions as AppOptions
from ._serve import load_agents as load_agents
from ._serve import load_auth as load_auth
from ._serve import serve as serve
from ._serve import tune_gc as tune_gc
from ._serve_options import ServeOptions as ServeOptions

__all__ = [
    "AppOptions",
    "ServeOptions",
    "create_app",
    "load_agents",
    "load_auth",
    "serve",
    "tune_gc",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

"""The built-in web page at ``/ui``: threads, a run's live actor tree, messages,
todos, files and interrupts (approve / edit / reject).

Static files shipped in the package (``server/ui/``; no build step, nothing
loaded from elsewhere: it works offline). The page talks to this server's own
Agent Protocol endpoints, same-origin; with authentication configured it asks
for an API key (kept in the tab's ``sessionStorage``, sent as ``X-Api-Key``).
The files hold no secrets, so they are served without authentication
(``_authz.OPEN_PATHS``).
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

__all__ = ["UI_PATHS", "ui_routes"]

_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "stream.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
UI_PATHS = frozenset({"/ui", "/ui/", *(f"/ui/{name}" for name in _TYPES)})
"""The page's paths (open: they hold no secrets)."""


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("ui", name).read_bytes()


# Read once, when the server's modules are imported (before any event loop
# runs), so serving the page is no file I/O on the loop. A few tens of KiB.
_FILES = {name: _read(name) for name in _TYPES}


async def ui_file(request: Request) -> Response:
    name = request.path_params.get("name", "index.html")
    if name not in _TYPES:
        return Response("not found", status_code=404, media_type="text/plain")
    return Response(
        _FILES[name],
        media_type=_TYPES[name],
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


# A mount (not in /openapi.json); "/ui" is redirected to "/ui/" by the router.
ui_routes = [
    Mount(
        "/ui",
        routes=[
            Route("/", ui_file, methods=["GET"]),
            Route("/{name}", ui_file, methods=["GET"]),
        ],
    )
]

"""The server's OpenAPI description at ``/openapi.json``, and a page of it at ``/docs``.

The description is made from the app's own routes (so it lists exactly what
is served) and the pydantic models that validate their bodies (so a body's
schema is the one the server checks). OpenAPI 3.1: a client generator
(``openapi-typescript``, ``openapi-python-client``...) reads it. ``/docs`` is one
HTML page rendered here, with no script, font or stylesheet from elsewhere: it
works offline.
"""

from __future__ import annotations

import html
import re
from typing import NotRequired, TypedDict

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ._schemas import (
    AssistantSearch,
    HistoryRequest,
    RunCreate,
    RunsCancel,
    StoreDelete,
    StoreNamespaces,
    StorePut,
    StoreSearch,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    ThreadStateUpdate,
)

__all__ = ["openapi", "openapi_routes"]

# The body each endpoint validates, by the endpoint function's name.
_BODIES: dict[str, type[BaseModel]] = {
    "create_run": RunCreate,
    "stream_run": RunCreate,
    "wait_run": RunCreate,
    "cancel_runs": RunsCancel,
    "create_thread": ThreadCreate,
    "patch_thread": ThreadPatch,
    "search_threads": ThreadSearch,
    "count_threads": ThreadSearch,
    "update_state": ThreadStateUpdate,
    "history": HistoryRequest,
    "get_state_at_checkpoint": HistoryRequest,
    "search_assistants": AssistantSearch,
    "count_assistants": AssistantSearch,
    "put_item": StorePut,
    "delete_item": StoreDelete,
    "search_items": StoreSearch,
    "list_namespaces": StoreNamespaces,
}
_STREAMS = frozenset({"stream_run", "join_stream", "stream_events"})
_TAGS = (("/assistants", "assistants"), ("/threads", "threads"), ("/runs", "runs"))
_PARAM = re.compile(r"{([^}:]+)(?::[^}]*)?}")
_ERROR = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}


def _tag(path: str) -> str:
    if "/runs" in path:
        return "runs"
    for prefix, tag in _TAGS:
        if path.startswith(prefix):
            return tag
    return "store" if path.startswith("/store") else "server"


def _summary(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _operation_id(name: str, method: str, path: str, taken: set[str]) -> str:
    """The endpoint's name; with its method, then its path's last word, if taken
    (one function may serve two routes: a generator names methods by it)."""
    for candidate in (name, f"{name}_{method}", f"{name}_{method}_{_PARAM.sub('', path)}"):
        candidate = re.sub(r"[^A-Za-z0-9_]+", "_", candidate).strip("_")
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    raise AssertionError(f"two routes {method.upper()} {path}")  # the router has one


class _RequestBody(TypedDict):
    required: bool
    content: dict[str, dict[str, dict[str, str]]]  # media type -> {"schema": {"$ref": ...}}


class _Operation(TypedDict):
    """An OpenAPI operation, with the keys this description writes."""

    operationId: str
    summary: str
    tags: list[str]
    parameters: list[dict[str, object]]
    requestBody: NotRequired[_RequestBody]
    responses: NotRequired[dict[str, dict[str, object]]]  # (set last: the keys' order)


class OpenAPI(TypedDict):
    """The OpenAPI document :func:`openapi` writes."""

    openapi: str
    info: dict[str, str]
    paths: dict[str, dict[str, _Operation]]
    components: dict[str, dict[str, object]]


def _operation(
    name: str, method: str, path: str, schemas: dict[str, object], taken: set[str]
) -> _Operation:
    operation: _Operation = {
        "operationId": _operation_id(name, method, path, taken),
        "summary": _summary(name),
        "tags": [_tag(path)],
        "parameters": [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
            for p in _PARAM.findall(path)
        ],
    }
    model = _BODIES.get(name) if method in ("post", "put", "patch", "delete") else None
    if model is not None:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        operation["requestBody"] = {
            "required": False,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    ok: dict[str, object]
    if name in _STREAMS:
        ok = {"description": "Server-sent events", "content": {"text/event-stream": {}}}
    else:
        ok = {"description": "OK", "content": {"application/json": {"schema": {}}}}
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    operation["responses"] = {
        "200": ok,
        "404": {"description": "Not found", **error},
        "422": {"description": "Invalid request (the detail names the field)", **error},
    }
    return operation


def openapi(routes: list[BaseRoute]) -> OpenAPI:
    """The OpenAPI 3.1 description of ``routes`` (an app's)."""
    paths: dict[str, dict[str, _Operation]] = {}
    schemas: dict[str, object] = {"Error": _ERROR}
    taken: set[str] = set()
    for route in routes:
        if not isinstance(route, Route) or route.path in ("/openapi.json", "/docs"):
            continue
        name = getattr(route.endpoint, "__name__", "endpoint")
        if name == "not_supported":
            continue  # answers 405 / 422 only: not an operation of this server
        path = _PARAM.sub(r"{\1}", route.path)
        for method in sorted((route.methods or set()) - {"HEAD"}):
            paths.setdefault(path, {})[method.lower()] = _operation(
                name, method.lower(), path, schemas, taken
            )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "deepactors",
            "version": "0.1.0",
            "description": "LangGraph's Agent Protocol, served by deepactors.",
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }


async def openapi_json(request: Request) -> Response:
    return JSONResponse(openapi(list(request.app.routes)))


async def docs(request: Request) -> Response:
    spec = openapi(list(request.app.routes))
    rows = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody")
            ref = body["content"]["application/json"]["schema"]["$ref"] if body else ""
            rows.append(
                f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}</code>"
                f"</td><td>{html.escape(operation['summary'])}</td>"
                f"<td>{html.escape(ref.rsplit('/', 1)[-1])}</td></tr>"
            )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>deepactors API</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:2px 12px}</style></head>"
        "<body><h1>deepactors: LangGraph Agent Protocol</h1>"
        "<p>Machine-readable: <a href='openapi.json'>openapi.json</a> (OpenAPI 3.1).</p>"
        "<table><tr><th>Method</th><th>Path</th><th>Operation</th><th>Body</th></tr>"
        + "".join(rows)
        + "</table></body></html>"
    )
    return HTMLResponse(page)


openapi_routes = [
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
]

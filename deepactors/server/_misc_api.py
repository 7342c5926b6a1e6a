"""Assistants, the store, and the server's meta endpoints (health and readiness)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
from pydantic import BaseModel, create_model
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import PersistenceError
from ..filediff import FileRecord
from ..limits import ttl_seconds
from ..messages import Message
from ..persistence import Store, StoreItem
from ..persistence.index import SemanticSearch
from ..persistence.ttl import ExpiringStore
from ..state import Todo
from ._authz import caller, owned_namespace
from ._records import AssistantRecord, iso, matches
from ._runs import RunManager
from ._schemas import (
    AssistantSearch,
    StoreDelete,
    StoreNamespaces,
    StorePut,
    StoreSearch,
    read_body,
)

__all__ = ["misc_routes"]


def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.runs
    return manager


# -- assistants ------------------------------------------------------------------------


def _assistants(request: Request, body: AssistantSearch) -> list[AssistantRecord]:
    return [
        a
        for a in _manager(request).assistants.values()
        if (body.graph_id is None or a.graph_id == body.graph_id)
        and (body.name is None or body.name.lower() in a.graph_id.lower())
        and matches({"created_by": "system"}, body.metadata)
    ]


async def search_assistants(request: Request) -> Response:
    body = await read_body(request, AssistantSearch)
    found = _assistants(request, body)[body.offset : body.offset + body.limit]
    return JSONResponse([a.to_json() for a in found])


async def count_assistants(request: Request) -> Response:
    body = await read_body(request, AssistantSearch)
    return JSONResponse(len(_assistants(request, body)))


async def get_assistant(request: Request) -> Response:
    assistant = _manager(request).assistant(request.path_params["assistant_id"])
    return JSONResponse(assistant.to_json())


async def assistant_versions(request: Request) -> Response:
    assistant = _manager(request).assistant(request.path_params["assistant_id"])
    return JSONResponse([assistant.to_json()])


def _schema(name: str, fields: dict[str, Any]) -> dict[str, object]:
    model: type[BaseModel] = create_model(name, **fields)
    return model.model_json_schema()


async def get_schemas(request: Request) -> Response:
    assistant = _manager(request).assistant(request.path_params["assistant_id"])
    channels = assistant.agent.spec.channels
    inputs: dict[str, Any] = {
        "messages": (list[Message], ...),
        "files": (dict[str, FileRecord] | None, None),
    }
    for name, channel in channels.items():
        if name not in inputs and not channel.private:
            inputs[name] = (Any, None)
    outputs = {**inputs, "todos": (list[Todo], []), "structured_response": (Any, None)}
    for name in channels:
        outputs.setdefault(name, (Any, None))
    state = _schema("State", outputs)
    return JSONResponse(
        {
            "graph_id": assistant.graph_id,
            "input_schema": _schema("Input", inputs),
            "output_schema": state,
            "state_schema": state,
            "config_schema": {"title": "Config", "type": "object", "properties": {}},
            "context_schema": {"title": "Context", "type": "object", "additionalProperties": True},
        }
    )


async def get_graph(request: Request) -> Response:
    _manager(request).assistant(request.path_params["assistant_id"])
    nodes = [
        {"id": n, "type": "runnable", "data": n} for n in ("__start__", "model", "tools", "__end__")
    ]
    edges = [
        {"source": "__start__", "target": "model"},
        {"source": "model", "target": "tools", "conditional": True},
        {"source": "tools", "target": "model"},
        {"source": "model", "target": "__end__", "conditional": True},
    ]
    return JSONResponse({"nodes": nodes, "edges": edges})


async def get_subgraphs(request: Request) -> Response:
    _manager(request).assistant(request.path_params["assistant_id"])
    return JSONResponse({})


async def not_supported(request: Request) -> Response:
    raise HTTPException(
        405, f"{request.method} {request.url.path}: assistants are the served agents, read-only"
    )


# -- store -----------------------------------------------------------------------------


def _store(request: Request) -> Store:
    store: Store | None = request.app.state.store
    if store is None:
        raise HTTPException(404, "this server has no store (create_app(..., store=...))")
    return store


_NO_TTL = (
    "ttl: this server's store keeps items for ever; give it time to live: serve "
    "--store-ttl MINUTES, langgraph.json's store.ttl, or create_app(store=ExpiringStore(...))"
)


def _refuse_reserved(namespace: Sequence[str]) -> None:
    """Namespaces whose first label starts with ``__`` are the store wrappers' own."""
    if namespace and namespace[0].startswith("__"):
        raise HTTPException(422, "namespace: a first label starting with '__' is reserved")


def _refresh(request: Request) -> bool | None:
    raw = request.query_params.get("refresh_ttl")
    return None if raw is None else raw.lower() in ("true", "1", "yes")


def _item(item: StoreItem) -> dict[str, object]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
    }


async def put_item(request: Request) -> Response:
    body = await read_body(request, StorePut)
    store = _store(request)
    _refuse_reserved(body.namespace)
    await owned_namespace(tuple(body.namespace), "update")
    if body.ttl is not None and not isinstance(store, ExpiringStore):
        raise HTTPException(422, _NO_TTL)
    ttl = ttl_seconds(body.ttl, what="ttl")  # (an InputError: 422)
    try:
        if isinstance(store, ExpiringStore):
            await store.put(tuple(body.namespace), body.key, body.value, ttl=ttl)
        else:
            await store.put(tuple(body.namespace), body.key, body.value)
    except (TypeError, ValueError) as exc:
        raise HTTPException(422, f"value: {exc}") from None
    return Response(status_code=204)


async def get_item(request: Request) -> Response:
    raw_ns = request.query_params.get("namespace", "")
    key = request.query_params.get("key")
    if not key:
        raise HTTPException(422, "key: required")
    namespace = tuple(raw_ns.split("."))
    if not all(namespace):
        raise HTTPException(422, f"namespace: labels joined by '.', not {raw_ns!r}")
    _refuse_reserved(namespace)
    await owned_namespace(namespace, "read")
    store = _store(request)
    if isinstance(store, ExpiringStore):
        item = await store.get(namespace, key, refresh_ttl=_refresh(request))
    else:
        item = await store.get(namespace, key)
    return JSONResponse(None if item is None else _item(item))


async def delete_item(request: Request) -> Response:
    body = await read_body(request, StoreDelete)
    await owned_namespace(tuple(body.namespace), "delete")
    await _store(request).delete(tuple(body.namespace), body.key)
    return Response(status_code=204)


async def search_items(request: Request) -> Response:
    body = await read_body(request, StoreSearch)
    store = _store(request)
    prefix = await _own_prefix(tuple(body.namespace_prefix))
    if body.query:
        if not isinstance(store, SemanticSearch):
            raise HTTPException(
                422,
                "query: this server's store has no index to search by meaning (give it "
                "one: langgraph.json's store.index, or create_app(store=IndexedStore(...)))",
            )
        try:
            scored = await store.semantic_search(
                prefix,
                body.query,
                filter=body.filter,
                limit=body.limit,
                offset=body.offset,
            )
        except ValueError as exc:
            raise HTTPException(422, f"query: {exc}") from None
        return JSONResponse({"items": [{**_item(i), "score": s} for i, s in scored]})
    if isinstance(store, ExpiringStore):
        items = await store.search(prefix, refresh_ttl=body.refresh_ttl)
    else:
        items = await store.search(prefix)
    found = [i for i in items if matches(i.value, body.filter)]
    page = found[body.offset : body.offset + body.limit]
    return JSONResponse({"items": [{**_item(i), "score": None} for i in page]})


async def _own_prefix(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """A search prefix kept to the caller's own namespaces (all of them for none)."""
    who = caller()
    if who is not None and not prefix:
        prefix = (who.namespace_label,)
    await owned_namespace(prefix, "search")
    return prefix


async def list_namespaces(request: Request) -> Response:
    body = await read_body(request, StoreNamespaces)
    items = await _store(request).search(await _own_prefix(tuple(body.prefix or ())))
    seen: dict[tuple[str, ...], None] = {}
    for item in items:
        ns = item.namespace
        if body.suffix and ns[-len(body.suffix) :] != tuple(body.suffix):
            continue
        seen.setdefault(ns[: body.max_depth] if body.max_depth else ns, None)
    names = [list(ns) for ns in seen][body.offset : body.offset + body.limit]
    return JSONResponse({"namespaces": names})


# -- meta ------------------------------------------------------------------------------


READY_TIMEOUT = 3.0
"""Seconds the readiness check waits for a database to answer."""


@runtime_checkable
class _Pingable(Protocol):
    """A checkpointer or store with a database to ask (PostgreSQL's)."""

    @property
    def location(self) -> str: ...

    async def ping(self) -> None: ...


async def ok(request: Request) -> Response:
    """Liveness (``/ok``): 200 while the app serves, 503 once its lifespan has ended.

    With ``?check_db=1`` (the LangGraph server's spelling), readiness instead.
    """
    if request.query_params.get("check_db") not in (None, "", "0", "false"):
        return await ready(request)
    if getattr(request.app.state, "serving", None) is False:
        return JSONResponse(
            {"ok": False, "detail": "the server has stopped serving (shut down, or failed)"},
            status_code=503,
        )
    return JSONResponse({"ok": True})


async def ready(request: Request) -> Response:
    """Readiness (``/ready``): 200 when every database the server needs answers, else 503.

    Each database is listed with its state: the runs database as the relay
    last found it (down from the moment its connection drops until it is
    connected again), each PostgreSQL checkpointer and store by a query
    answered within :data:`READY_TIMEOUT`.
    """
    manager = _manager(request)
    checks: list[dict[str, object]] = []
    if manager.relay.shared:
        why = manager.relay.not_ready()
        checks.append({"name": "runs", "ready": why is None, "detail": why or "connected"})
    pingable: dict[int, tuple[str, _Pingable]] = {}
    for assistant in manager.assistants.values():
        saver = assistant.agent.checkpointer
        if isinstance(saver, _Pingable):
            pingable.setdefault(id(saver), ("checkpointer", saver))
    store = request.app.state.store
    if isinstance(store, _Pingable):
        pingable.setdefault(id(store), ("store", store))

    async def check(name: str, target: _Pingable) -> None:
        detail, ok = f"{target.location}: no answer within {READY_TIMEOUT:g} s", False
        with anyio.move_on_after(READY_TIMEOUT):
            try:
                await target.ping()
                detail, ok = f"{target.location}: answers", True
            except PersistenceError as exc:
                detail = str(exc)
        checks.append({"name": name, "ready": ok, "detail": detail})

    async with anyio.create_task_group() as tg:
        for name, target in pingable.values():
            tg.start_soon(check, name, target)
    ready = all(c["ready"] for c in checks)
    return JSONResponse({"ok": ready, "checks": checks}, status_code=200 if ready else 503)


async def info(request: Request) -> Response:
    return JSONResponse(
        {
            "version": "deepactors",
            "flags": {"assistants": True, "crons": True, "langsmith": False},
            "metadata": {},
        }
    )


misc_routes = [
    Route("/", ok, methods=["GET"]),
    Route("/ok", ok, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
    Route("/assistants/search", search_assistants, methods=["POST"]),
    Route("/assistants/count", count_assistants, methods=["POST"]),
    Route("/assistants", not_supported, methods=["POST"]),
    Route("/assistants/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/assistants/{assistant_id}", not_supported, methods=["PATCH", "DELETE"]),
    Route("/assistants/{assistant_id}/schemas", get_schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/graph", get_graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", get_subgraphs, methods=["GET"]),
    Route("/assistants/{assistant_id}/versions", assistant_versions, methods=["POST"]),
    Route("/store/items", put_item, methods=["PUT"]),
    Route("/store/items", get_item, methods=["GET"]),
    Route("/store/items", delete_item, methods=["DELETE"]),
    Route("/store/items/search", search_items, methods=["POST"]),
    Route("/store/namespaces", list_namespaces, methods=["POST"]),
]

"""Thread endpoints: create, get, search, count, patch, delete, state, history."""

from __future__ import annotations

import time

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..actors import ThreadHandle, ThreadState
from ._authz import may_thread, owned, visible, without_owner
from ._checkpoints import checkpoint_json, fork_at, requested_seq, superseded_history
from ._records import StateUpdated, ThreadRecord, iso, matches, new_uuid, public_id
from ._run_driver import thread_values
from ._runs import RunManager
from ._schemas import (
    HistoryRequest,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    ThreadStateUpdate,
    read_body,
)
from ._wire_json import StateJSON

__all__ = ["state_at", "thread_routes"]


def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.runs
    return manager


async def create_thread(request: Request) -> Response:
    body = await read_body(request, ThreadCreate)
    if body.supersteps:
        raise HTTPException(422, "supersteps: not supported by this server")
    manager = _manager(request)
    metadata = owned(body.metadata)
    graph = body.metadata.get("graph_id")
    graph_id = graph if isinstance(graph, str) and graph in manager.assistants else None
    if body.thread_id is None:
        thread = ThreadRecord(
            thread_id=new_uuid(),
            metadata=metadata,
            graph_id=graph_id,
            ttl=body.ttl,
            ttl_strategy=body.ttl_strategy,
        )
        await manager.lookup.add_thread(thread)
        return JSONResponse(thread.to_json(await manager.saved(thread)))
    # The caller's own thread of that id, or a new one: with authentication,
    # another's is not there for this caller (see _thread_lookup).
    thread, made = await manager.lookup.claim_thread(
        body.thread_id, metadata, graph_id, body.ttl, body.ttl_strategy
    )
    if not made:
        if body.if_exists == "do_nothing" and await may_thread(thread, "read"):
            return JSONResponse(thread.to_json(await manager.saved(thread)))
        raise HTTPException(409, f"thread {body.thread_id!r} already exists")
    return JSONResponse(thread.to_json(await manager.saved(thread)))


def _included(request: Request) -> set[str]:
    """``?include=ttl`` (repeated, or comma-separated, as the SDKs send it)."""
    return {
        part.strip()
        for value in request.query_params.getlist("include")
        for part in value.split(",")
        if part.strip()
    }


async def get_thread(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    answer = thread.to_json(await manager.saved(thread))
    if "ttl" in _included(request):
        answer["ttl"] = thread.ttl_json()
    return JSONResponse(answer)


async def patch_thread(request: Request) -> Response:
    body = await read_body(request, ThreadPatch)
    thread = await _manager(request).lookup.thread(request.path_params["thread_id"], "update")
    # Its owner is the server's to say: a patch cannot hand the thread to another.
    thread.metadata = {**thread.metadata, **without_owner(body.metadata)}
    if body.ttl is not None:
        thread.ttl, thread.ttl_strategy = body.ttl, body.ttl_strategy
    thread.updated_at = time.time()
    await _manager(request).lookup.save_metadata(thread)
    return JSONResponse(thread.to_json(await _manager(request).saved(thread)))


async def delete_thread(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"], "delete")
    await manager.delete_thread(thread)
    return Response(status_code=204)


async def _search(manager: RunManager, body: ThreadSearch) -> list[ThreadRecord]:
    candidates = [
        t
        for t in await visible(manager.threads.values())
        if not t.temporary
        and matches(t.metadata, body.metadata)
        and (body.ids is None or t.name in body.ids)
    ]
    if body.values or body.status is not None:
        # Their saved state decides: read through each thread's handle.
        saved = {t.thread_id: await manager.saved(t) for t in candidates}
        candidates = [
            t
            for t in candidates
            if matches(saved[t.thread_id].values or {}, body.values)
            and (body.status is None or t.status(saved[t.thread_id]) == body.status)
        ]
    key = body.sort_by or "created_at"
    candidates.sort(key=lambda t: getattr(t, key), reverse=(body.sort_order or "desc") == "desc")
    return candidates


async def search_threads(request: Request) -> Response:
    body = await read_body(request, ThreadSearch)
    manager = _manager(request)
    found = await _search(manager, body)
    page = found[body.offset : body.offset + body.limit]
    return JSONResponse([t.to_json(await manager.saved(t)) for t in page])


async def count_threads(request: Request) -> Response:
    body = await read_body(request, ThreadSearch)
    return JSONResponse(len(await _search(_manager(request), body)))


def _state_json(
    thread_id: str, state: ThreadState, *, parent: int | None, created_at: float | None
) -> StateJSON:
    shown = thread_values(state)
    interrupts = shown.interrupts
    tasks: list[dict[str, object]] = [
        {
            "id": f"{task.name}:{state.seq}",
            "name": task.name,
            "path": [],
            "error": None,
            "interrupts": interrupts,
            "checkpoint": None,
            "state": None,
            "result": None,
        }
        for task in state.tasks
    ]
    checkpoint = checkpoint_json(thread_id, state.seq)
    return {
        "values": shown.values or {},
        "next": list(state.next),
        "tasks": tasks,
        "metadata": {"source": "loop", "step": state.seq or 0},
        "created_at": iso(created_at) if created_at is not None else None,
        "checkpoint": checkpoint,
        "parent_checkpoint": checkpoint_json(thread_id, parent),
        "interrupts": interrupts,
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": str(parent) if parent is not None else None,
    }


def _seq(raw: object, field: str) -> int:
    try:
        if not isinstance(raw, str | int | float):
            raise TypeError(raw)
        seq = int(raw)
    except (TypeError, ValueError):
        raise HTTPException(422, f"{field}: a checkpoint id of this server, not {raw!r}") from None
    if seq < 1:
        raise HTTPException(422, f"{field}: a checkpoint id of this server, not {raw!r}")
    return seq


async def state_at(handle: ThreadHandle, name: str, seq: int | None) -> StateJSON:
    """The thread's state at checkpoint ``seq`` (None: its head), as the state endpoints show it.

    Raises:
        HTTPException: 404 the thread has no such checkpoint.
    """
    thread_id = public_id(handle.thread_id)
    # A checkpoint a fork left behind is read as its own branch stood then.
    if seq is not None and seq not in {r.seq for r in await handle.history(superseded=True)}:
        raise HTTPException(404, f"thread {thread_id!r} has no checkpoint {seq}")
    records = await handle.history(upto_seq=seq)
    seqs = [r.seq for r in records if r.path == name]
    state = await handle.state(upto_seq=seq)
    created = next((r.created_at for r in records if r.seq == state.seq), None)
    parent = seqs[-2] if len(seqs) > 1 else None
    return _state_json(thread_id, state, parent=parent, created_at=created)


async def get_state(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    name = manager.lookup.thread_assistant(thread).agent.name
    raw = request.path_params.get("checkpoint_id")
    seq = None if raw is None else _seq(raw, "checkpoint_id")
    return JSONResponse(await state_at(manager.handle(thread), name, seq))


async def get_state_at_checkpoint(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    body = await read_body(request, HistoryRequest)
    seq = requested_seq(body.checkpoint, None)  # no id: the head (RemoteGraph.get_state)
    name = manager.lookup.thread_assistant(thread).agent.name
    return JSONResponse(await state_at(manager.handle(thread), name, seq))


async def update_state(request: Request) -> Response:
    body = await read_body(request, ThreadStateUpdate)
    seq = requested_seq(body.checkpoint, body.checkpoint_id)
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"], "update")
    if seq is not None:  # updated from an older checkpoint: a fork there
        await fork_at(manager.handle(thread), seq)
        await manager.refresh(thread)
    if body.values:
        await manager.update_state(thread, body.values)
    if thread.watchers:  # joins of the thread's stream with state_update
        name = manager.lookup.thread_assistant(thread).agent.name
        thread.tell(StateUpdated(await state_at(manager.handle(thread), name, None)))
    records = await manager.handle(thread).history()
    return JSONResponse(
        {"checkpoint": checkpoint_json(thread.name, records[-1].seq if records else None)}
    )


async def history(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    if request.method == "GET":
        limit_raw = request.query_params.get("limit", "10")
        body = HistoryRequest(
            limit=_seq(limit_raw, "limit"), before=request.query_params.get("before")
        )
    else:
        body = await read_body(request, HistoryRequest)
    before: object = body.before
    if isinstance(before, dict):
        before = before.get("checkpoint_id")
    upper = None if before is None else _seq(before, "before")
    handle = manager.handle(thread)
    # Every branch's checkpoints, as LangGraph lists them: a fork leaves the
    # earlier branch readable, never silently gone.
    records = await handle.history(superseded=True)
    created = {r.seq: r.created_at for r in records}
    out: list[StateJSON] = []
    name = manager.lookup.thread_assistant(thread).agent.name
    for seq, parent in await superseded_history(handle, name):
        if upper is not None and seq >= upper:
            continue
        state = await handle.state(upto_seq=seq)
        snapshot = _state_json(thread.name, state, parent=parent, created_at=created[seq])
        if matches(snapshot["metadata"], body.metadata):
            out.append(snapshot)
        if len(out) >= body.limit:
            break
    return JSONResponse(out)


thread_routes = [
    Route("/threads", create_thread, methods=["POST"]),
    Route("/threads/search", search_threads, methods=["POST"]),
    Route("/threads/count", count_threads, methods=["POST"]),
    Route("/threads/{thread_id}", get_thread, methods=["GET"]),
    Route("/threads/{thread_id}", patch_thread, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete_thread, methods=["DELETE"]),
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", get_state_at_checkpoint, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]

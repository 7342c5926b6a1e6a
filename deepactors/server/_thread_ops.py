"""The rest of the SDK's threads, runs and assistants methods: copy, prune, batches, latest.

``POST /threads/{id}/copy`` (``threads.copy``): a new thread, the caller's, with
the source's metadata and its whole saved history (state, history and forks
read as the source's). ``POST /threads/prune`` (``threads.prune``): the named
threads deleted (``strategy="delete"``, the SDK's default), or their history
dropped, their latest state kept (``"keep_latest"``: ``ThreadHandle.keep_latest``);
those the caller cannot see are not counted. ``POST /runs/batch`` (``runs.create_batch``):
stateless runs, all checked before any starts. ``POST /assistants/{id}/latest``
(``assistants.set_latest``): an assistant here has one version, its agent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ConfigurationError, InputError
from ._authz import OWNER_KEY, owned
from ._records import ThreadRecord, new_uuid
from ._runs import RunManager
from ._runs_api import thread_of
from ._schemas import RunCreate, read_body

__all__ = ["keep_latest", "thread_op_routes"]

MAX_BATCH = 100
"""Runs one ``POST /runs/batch`` may create."""


def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.runs
    return manager


async def copy_thread(request: Request) -> Response:
    manager = _manager(request)
    source = await manager.lookup.thread(request.path_params["thread_id"], "read")
    assistant = manager.lookup.thread_assistant(source)
    metadata = owned({k: v for k, v in source.metadata.items() if k != OWNER_KEY})
    copy = ThreadRecord(thread_id=new_uuid(), metadata=metadata, graph_id=source.graph_id)
    await manager.lookup.add_thread(copy)
    try:
        await manager.runtime.thread(assistant.agent, copy.thread_id).copy_from(source.thread_id)
    except BaseException:
        await manager.delete_thread(copy)
        raise
    return JSONResponse(copy.to_json(await manager.saved(copy)))


class _Prune(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_ids: list[str] = Field(max_length=10_000)
    strategy: Literal["delete", "keep_latest"] = "delete"


async def prune_threads(request: Request) -> Response:
    manager = _manager(request)
    body = await read_body(request, _Prune)
    pruned = 0
    for thread_id in dict.fromkeys(body.thread_ids):
        try:
            thread = await manager.lookup.thread(thread_id, "delete")
        except HTTPException as exc:
            if exc.status_code == 404:
                continue  # absent, or another's: not counted, not told apart
            raise
        if body.strategy == "delete":
            await manager.delete_thread(thread)
        else:
            await keep_latest(manager, thread)
        pruned += 1
    return JSONResponse({"pruned_count": pruned})


async def keep_latest(manager: RunManager, thread: ThreadRecord) -> int:
    """Drop the thread's history, keeping its latest state (after a run in progress ends).

    Returns:
        The number of records dropped.
    """
    if thread.temporary:
        return 0
    try:
        return await manager.handle(thread).keep_latest()
    except (InputError, ConfigurationError) as exc:
        raise HTTPException(422, f"thread {thread.name!r}: {exc}") from None


async def create_batch(request: Request) -> Response:
    manager = _manager(request)
    raw: object = await request.json() if await request.body() else None
    if not isinstance(raw, list) or not raw:
        raise HTTPException(422, "body: a list of runs to create, like [{'assistant_id': ...}]")
    if len(raw) > MAX_BATCH:
        raise HTTPException(422, f"body: at most {MAX_BATCH} runs in one batch")
    bodies: list[RunCreate] = []
    for i, item in enumerate(raw):
        try:
            body = RunCreate.model_validate(item)
            body.refuse_unsupported()
            manager.assistant(body.assistant_id)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise HTTPException(422, f"[{i}].{where}: {err['msg']}") from None
        except HTTPException as exc:
            raise HTTPException(exc.status_code, f"[{i}]: {exc.detail}") from None
        if body.command is not None:
            raise HTTPException(422, f"[{i}].command: a batch starts new stateless runs")
        bodies.append(body)
    runs = []
    for body in bodies:
        try:
            thread = await thread_of(manager, None, body)
            runs.append(await manager.create(thread, body.without_stream()))
        except InputError as exc:
            raise HTTPException(422, str(exc)) from None
    return JSONResponse([run.to_json() for run in runs])


async def set_latest(request: Request) -> Response:
    assistant = _manager(request).assistant(request.path_params["assistant_id"])
    raw: object = await request.json() if await request.body() else {}
    version = raw.get("version") if isinstance(raw, dict) else None
    if version != assistant.to_json().get("version", 1):
        raise HTTPException(
            404, f"assistant {assistant.graph_id!r} has no version {version!r} (only its agent's)"
        )
    return JSONResponse(assistant.to_json())


thread_op_routes = [
    Route("/threads/prune", prune_threads, methods=["POST"]),
    Route("/threads/{thread_id}/copy", copy_thread, methods=["POST"]),
    Route("/runs/batch", create_batch, methods=["POST"]),
    Route("/assistants/{assistant_id}/latest", set_latest, methods=["POST"]),
]

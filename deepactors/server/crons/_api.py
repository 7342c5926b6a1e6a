"""The crons endpoints, as langgraph-sdk's ``client.crons`` calls them.

``POST /runs/crons`` (a new thread per firing), ``POST /threads/{id}/runs/crons``
(every firing on that thread), ``POST /runs/crons/search`` and ``/count``,
``PATCH /runs/crons/{id}``, ``DELETE /runs/crons/{id}``. With authentication a
cron is its creator's: others find none (404), and its runs act for it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...errors import InputError
from ...limits import breakpoints
from .._authz import caller, may
from .._records import AssistantRecord
from .._runs import RunManager
from .._schemas import RunCreate, read_body
from ._books import CronBook
from ._model import MAX_CRONS, Cron, check_schedule, check_timezone, load_croniter, parse_time
from ._scheduler import Scheduler

__all__ = ["cron_routes"]

# The run fields a cron keeps for each of its runs (the rest are the cron's own).
_RUN_FIELDS = (
    "input",
    "config",
    "context",
    "metadata",
    "webhook",
    "multitask_strategy",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "interrupt_before",
    "interrupt_after",
    "durability",
)


class _RunOptions(BaseModel):
    """What a cron's runs are made with, as ``POST /runs`` takes it (both bodies below)."""

    model_config = ConfigDict(extra="ignore")

    on_run_completed: Literal["delete", "keep"] | None = None
    input: dict[str, object] | None = None
    config: dict[str, object] | None = None
    context: dict[str, object] | None = None
    metadata: dict[str, object] | None = None
    webhook: str | None = None
    stream_mode: str | list[str] | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    durability: str | None = None


class CronCreate(_RunOptions):
    """``POST /runs/crons`` and ``/threads/{id}/runs/crons``."""

    assistant_id: str = Field(min_length=1)
    schedule: str
    timezone: str | None = None
    end_time: str | None = None
    enabled: bool = True
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None


class CronPatch(_RunOptions):
    """``PATCH /runs/crons/{id}``: what is given changes; ``end_time: null`` clears it."""

    schedule: str | None = None
    timezone: str | None = None
    end_time: str | None = None
    enabled: bool | None = None


class CronSearch(BaseModel):
    """``POST /runs/crons/search`` and ``/count``."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: dict[str, object] | None = None
    limit: int = Field(default=10, ge=0, le=10_000)
    offset: int = Field(default=0, ge=0)
    sort_by: (
        Literal[
            "cron_id",
            "assistant_id",
            "thread_id",
            "next_run_date",
            "created_at",
            "updated_at",
            "end_time",
        ]
        | None
    ) = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


def _state(request: Request) -> tuple[RunManager, CronBook, Scheduler]:
    state = request.app.state
    return state.runs, state.crons, state.scheduler


def _run_part(body: BaseModel) -> dict[str, object]:
    return {k: v for k in _RUN_FIELDS if (v := getattr(body, k, None)) is not None}


def _check_run(
    manager: RunManager,
    assistant: AssistantRecord,
    payload: dict[str, object],
    kept: bool,
) -> None:
    """Refuse now a cron whose runs would be refused at every firing.

    Raises:
        InputError: Its breakpoints name an unknown node, or it has some and its
            runs' threads are not ``kept`` (no thread of its own, and
            ``on_run_completed`` is ``delete``: nothing would be left to continue).
    """
    body = RunCreate.model_validate({**payload, "assistant_id": assistant.graph_id})
    body.refuse_unsupported()
    stops = breakpoints(body.interrupt_before, body.interrupt_after)
    if stops and not kept:
        raise InputError(
            "interrupt_before/interrupt_after: this cron's runs are on new threads deleted "
            "as they end; give the cron a thread, or on_run_completed='keep'"
        )
    if body.command is not None:
        raise HTTPException(422, "command: a cron starts runs with input, not a resume")
    if body.webhook is not None:
        from ..webhooks import check_webhook_url

        try:
            check_webhook_url(body.webhook, manager.webhooks)
        except InputError as exc:
            raise HTTPException(422, str(exc)) from None


async def create_cron(request: Request) -> Response:
    manager, book, scheduler = _state(request)
    body = await read_body(request, CronCreate)
    thread_id = request.path_params.get("thread_id")
    if thread_id is not None:
        await manager.lookup.thread(thread_id, "update")  # 404 if not the caller's
    who = caller()
    # The runs will be the caller's own (on a thread of theirs, or on new ones).
    if who is not None and not await may("runs", "create", who.id, None):
        raise HTTPException(403, "crons: you may not create runs")
    assistant = manager.assistant(body.assistant_id)
    await load_croniter()
    try:
        check_timezone(body.timezone)
        payload = _run_part(body)
        kept = thread_id is not None or body.on_run_completed == "keep"
        _check_run(manager, assistant, payload, kept)
        if len(await book.all()) >= MAX_CRONS:
            raise HTTPException(429, f"crons: this server keeps at most {MAX_CRONS}")
        cron = Cron(
            cron_id=str(uuid.uuid4()),
            assistant_id=assistant.graph_id,
            thread_id=thread_id,
            schedule=check_schedule(body.schedule),
            timezone=body.timezone,
            payload=payload,
            metadata=dict(body.metadata or {}),
            on_run_completed=body.on_run_completed or "delete",
            end_time=parse_time(body.end_time, "end_time"),
            enabled=body.enabled,
            owner=None if who is None else {**who.to_json(), "metadata": dict(who.metadata)},
        )
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    cron.schedule_from(time.time())
    await book.put(cron)
    scheduler.changed()
    return JSONResponse(cron.to_json(assistant.assistant_id))


async def _mine(request: Request) -> tuple[RunManager, CronBook, Scheduler, Cron]:
    manager, book, scheduler = _state(request)
    cron = await book.get(request.path_params["cron_id"])
    if cron is None or not _visible(cron):
        raise HTTPException(404, f"cron {request.path_params['cron_id']!r} not found")
    return manager, book, scheduler, cron


def _visible(cron: Cron) -> bool:
    who = caller()
    return who is None or cron.user_id == who.id


async def update_cron(request: Request) -> Response:
    manager, book, scheduler, cron = await _mine(request)
    body = await read_body(request, CronPatch)
    raw = json.loads(await request.body() or b"{}")  # valid: read_body checked it
    await load_croniter()
    try:
        if body.schedule is not None:
            cron.schedule = check_schedule(body.schedule)
        if body.timezone is not None:
            check_timezone(body.timezone)
            cron.timezone = body.timezone
        if isinstance(raw, dict) and "end_time" in raw:
            cron.end_time = parse_time(body.end_time, "end_time")
        if body.enabled is not None:
            cron.enabled = body.enabled
        if body.on_run_completed is not None:
            cron.on_run_completed = body.on_run_completed
        if body.metadata is not None:
            cron.metadata = dict(body.metadata)
        payload = {**cron.payload, **_run_part(body)}
        assistant = manager.assistant(cron.assistant_id)
        kept = cron.thread_id is not None or cron.on_run_completed == "keep"
        _check_run(manager, assistant, payload, kept)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    cron.payload = payload
    cron.updated_at = time.time()
    cron.schedule_from(time.time())
    await book.put(cron)
    scheduler.changed()
    return JSONResponse(cron.to_json(assistant.assistant_id))


async def delete_cron(request: Request) -> Response:
    _, book, scheduler, cron = await _mine(request)
    await book.delete(cron.cron_id)
    scheduler.changed()
    return Response(status_code=204)


async def _search(request: Request) -> tuple[RunManager, CronSearch, list[Cron]]:
    manager, book, _ = _state(request)
    body = await read_body(request, CronSearch)
    graph = None if body.assistant_id is None else manager.assistant(body.assistant_id).graph_id
    found = [
        c
        for c in await book.all()
        if _visible(c)
        and (graph is None or c.assistant_id == graph)
        and (body.thread_id is None or c.thread_id == body.thread_id)
        and (body.enabled is None or c.enabled == body.enabled)
        and all(c.metadata.get(k) == v for k, v in (body.metadata or {}).items())
    ]
    return manager, body, found


def _sort_key(field: str) -> Any:
    def key(cron: Cron) -> Any:
        value = {
            "next_run_date": cron.next_run,
            "assistant_id": cron.assistant_id,
        }.get(field, getattr(cron, field, None))
        return (value is None, value if value is not None else 0)

    return key


async def search_crons(request: Request) -> Response:
    manager, body, found = await _search(request)
    if body.sort_by is not None:
        found.sort(key=_sort_key(body.sort_by), reverse=body.sort_order == "desc")
    page = found[body.offset : body.offset + body.limit]
    out = [c.to_json(manager.assistant(c.assistant_id).assistant_id) for c in page]
    if body.select:
        out = [{k: v for k, v in c.items() if k in body.select} for c in out]
    return JSONResponse(out)


async def count_crons(request: Request) -> Response:
    _, _, found = await _search(request)
    return JSONResponse(len(found))


cron_routes = [
    Route("/runs/crons", create_cron, methods=["POST"]),
    Route("/runs/crons/search", search_crons, methods=["POST"]),
    Route("/runs/crons/count", count_crons, methods=["POST"]),
    Route("/runs/crons/{cron_id}", update_cron, methods=["PATCH"]),
    Route("/runs/crons/{cron_id}", delete_cron, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/crons", create_cron, methods=["POST"]),
]

"""Run endpoints: create (background), stream, wait, join, get, list, cancel; stateless too."""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._core.jsonvalue import JSONObject, JSONValue
from ..events import Event
from ..langchain.views import LangGraphStream
from ._authz import may_thread, owned
from ._frames import error_event
from ._records import ForgottenRun, RunRecord, Subscriber, ThreadRecord, new_uuid
from ._responses import EventSourceResponse, WaitResponse, error_response
from ._resumable import create_logged, join_logged, kept_log, open_resumable
from ._runs import RunManager
from ._schemas import RunCreate, RunsCancel, parse_body, read_body
from ._wire_json import GivenModes

__all__ = ["run_routes", "serve_stream", "stream_target", "thread_of"]


def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.runs
    return manager


def _adapter(modes: GivenModes, subgraphs: bool, thread_id: str | None) -> LangGraphStream:
    try:
        return LangGraphStream(modes, subgraphs=subgraphs, thread_id=thread_id)
    except ValueError as exc:
        raise HTTPException(422, f"stream_mode: {exc}") from None


async def _thread_for(request: Request, body: RunCreate) -> ThreadRecord:
    return await thread_of(_manager(request), request.path_params.get("thread_id"), body)


@runtime_checkable
class _Reachable(Protocol):
    """A checkpointer with a database to reach (PostgreSQL's)."""

    async def reach(self) -> None: ...


async def _reach_checkpointer(manager: RunManager, assistant_id: str) -> None:
    """Raise ``CheckpointUnavailable`` (503) now if the run's checkpoints could not be saved.

    A run is started after its request is answered; a database found down
    only by its first lease would fail it then, behind a 200.
    """
    saver = manager.assistant(assistant_id).agent.checkpointer
    if isinstance(saver, _Reachable):
        await saver.reach()


async def thread_of(manager: RunManager, thread_id: str | None, body: RunCreate) -> ThreadRecord:
    """The thread a run of ``body`` goes on: ``thread_id`` (made first with
    ``if_not_exists="create"``), else a new one, kept or not as ``body`` says.

    Raises:
        HTTPException: 404 no such thread of the caller's.
    """
    if thread_id is not None or body.on_completion == "keep":
        await _reach_checkpointer(manager, body.assistant_id)
    if thread_id is None:  # stateless: a thread of its own, gone when the run ends
        thread = ThreadRecord(
            thread_id=new_uuid(), temporary=body.on_completion != "keep", metadata=owned({})
        )
        if thread.temporary:
            manager.threads[thread.thread_id] = thread
        else:
            await manager.lookup.add_thread(thread)  # kept: other server processes know its owner
        return thread
    if body.if_not_exists == "create":
        # The caller's own, or a new one: another's thread of this id is absent here.
        await manager.lookup.claim_thread(thread_id, owned({}))
    return await manager.lookup.thread(thread_id, "update")


def _locations(run: RunRecord, suffix: str) -> dict[str, str]:
    base = f"/threads/{run.thread.name}/runs/{run.run_id}"
    if run.thread.temporary:
        return {"Content-Location": f"/runs/{run.run_id}"}
    return {"Location": f"{base}/{suffix}", "Content-Location": base}


async def create_run(request: Request) -> Response:
    body = await read_body(request, RunCreate)
    thread = await _thread_for(request, body)
    manager = _manager(request)
    try:
        if body.stream_resumable and not thread.temporary:  # for a join_stream later
            adapter = _adapter(body.stream_mode, body.stream_subgraphs, thread.name)
            finish = lambda run: _error_of(manager, run)  # noqa: E731
            run, _ = await create_logged(manager, thread, body, adapter, finish=finish, launch=True)
        else:
            run = await manager.create(thread, body.without_stream())
    except BaseException:
        _drop_unused(_manager(request), thread)
        raise
    return JSONResponse(
        run.to_json(), headers={"Content-Location": _locations(run, "")["Content-Location"]}
    )


def _drop_unused(manager: RunManager, thread: ThreadRecord) -> None:
    if thread.temporary and not thread.runs:
        manager.threads.pop(thread.thread_id, None)


async def stream_run(request: Request) -> Response:
    body = await read_body(request, RunCreate)
    return await _open_stream(_manager(request), request.path_params.get("thread_id"), body)


async def _open_stream(manager: RunManager, thread_id: str | None, body: RunCreate) -> Response:
    thread = await thread_of(manager, thread_id, body)
    adapter = _adapter(
        body.stream_mode, body.stream_subgraphs, None if thread.temporary else thread.name
    )
    cancel = body.on_disconnect != "continue"
    if body.stream_resumable and not thread.temporary:  # frames kept, with ids
        return await open_resumable(
            manager,
            thread,
            body,
            adapter,
            finish=lambda run: _error_of(manager, run),
            headers=lambda run: _locations(run, "stream"),
            on_disconnect=lambda run: _left(manager, run, cancel),
        )
    body = body.without_stream()  # a stateless run's frames are not kept
    send, receive = anyio.create_memory_object_stream[Event | bytes](float("inf"))
    try:
        # Created, not started: the response starts it once the client has
        # its first event (under a burst, that event goes out first).
        run = await manager.create(
            thread, body, subscriber=Subscriber(send, body.stream_subgraphs), launch=False
        )
    except BaseException:
        send.close()
        receive.close()
        _drop_unused(manager, thread)
        raise
    return EventSourceResponse(
        receive,
        adapter,
        run_id=run.run_id,
        on_disconnect=lambda: _left(manager, run, cancel),
        finish=lambda: _error_of(manager, run),
        headers=_locations(run, "stream"),
        launch=lambda: manager.launch(run),
        pacer=manager.runtime.pacer,
    )


_STREAM_TAIL = "/runs/stream"
_THREADS = "/threads/"


def stream_target(scope: Scope) -> tuple[bool, str | None]:
    """Whether a request is ``POST /runs/stream`` or ``POST /threads/{id}/runs/stream``,
    and its thread id (None: stateless): the two endpoints :func:`serve_stream` serves.
    """
    path: str = scope["path"]
    if scope["method"] != "POST" or not path.endswith(_STREAM_TAIL) or scope.get("root_path"):
        return False, None
    if path == _STREAM_TAIL:
        return True, None
    head = path[: -len(_STREAM_TAIL)]
    # "/threads/{thread_id}", as the router matches it: one non-empty segment.
    thread_id = head[len(_THREADS) :]
    if head.startswith(_THREADS) and thread_id and "/" not in thread_id:
        return True, thread_id
    return False, None


async def serve_stream(
    manager: RunManager, thread_id: str | None, scope: Scope, receive: Receive, send: Send
) -> None:
    """A streaming run's request, answered without the router and middleware stack.

    What the route does (same body checks, same errors and status codes), for
    the endpoint a burst of clients hits at once: each request's first event
    goes out about 50 us sooner, and the last of 1,000 waits that much less
    for each of the others.
    """
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return  # gone before its request was read: nothing was created
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    response: Response
    try:
        body = parse_body(b"".join(chunks), RunCreate)
        response = await _open_stream(manager, thread_id, body)
    except Exception as exc:
        answer = error_response(exc, scope["path"])
        if answer is None:
            raise
        response = answer
    await response(scope, receive, send)


def _left(manager: RunManager, run: RunRecord, cancel: bool) -> None:
    """The client went away: cancel its run (and subtree) unless told to continue."""
    if cancel:
        manager.cancel_soon(run)


async def _error_of(manager: RunManager, run: RunRecord) -> JSONValue:
    await run.done.wait()
    return error_event(run.result, run.status)


async def wait_run(request: Request) -> Response:
    body = await read_body(request, RunCreate)
    thread = await _thread_for(request, body)
    manager = _manager(request)
    try:
        run = await manager.create(thread, body.without_stream())
    except BaseException:
        _drop_unused(_manager(request), thread)
        raise
    cancel = body.on_disconnect != "continue"
    return WaitResponse(
        lambda: manager.result(run),
        on_disconnect=lambda: _left(manager, run, cancel),
        headers=_locations(run, "join"),
    )


async def list_runs(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"])
    limit, offset = _int(request, "limit", 10), _int(request, "offset", 0)
    status = request.query_params.get("status")
    known = await manager.runs_of(thread)
    runs = [r for r in reversed(known) if status is None or r.status == status]
    return JSONResponse([r.to_json() for r in runs[offset : offset + limit]])


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(422, f"{name}: an integer, not {raw!r}") from None
    if value < 0:
        raise HTTPException(422, f"{name}: must be >= 0")
    return value


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() in ("1", "true", "yes")


async def get_run(request: Request) -> Response:
    manager = _manager(request)
    run = await manager.find_past(request.path_params["thread_id"], request.path_params["run_id"])
    return JSONResponse(run.to_json())


async def delete_run(request: Request) -> Response:
    manager = _manager(request)
    thread = await manager.lookup.thread(request.path_params["thread_id"], "delete")
    if thread.forgotten.pop(request.path_params["run_id"], None) is not None:
        return Response(status_code=204)  # ended long ago: what was left of it
    run = manager.run(thread, request.path_params["run_id"])
    if not run.done.is_set():
        raise HTTPException(409, f"run {run.run_id} is still {run.status}; cancel it first")
    manager.runs.pop(run.run_id, None)
    run.thread.runs.remove(run)
    return Response(status_code=204)


async def join_run(request: Request) -> Response:
    manager = _manager(request)
    run = await manager.find_past(request.path_params["thread_id"], request.path_params["run_id"])
    if isinstance(run, ForgottenRun):
        return JSONResponse(await _past_result(manager, run))
    cancel = _flag(request, "cancel_on_disconnect")
    return WaitResponse(
        lambda: manager.result(run), on_disconnect=lambda: _left(manager, run, cancel)
    )


async def join_stream(request: Request) -> Response:
    manager = _manager(request)
    run = await manager.find_past(request.path_params["thread_id"], request.path_params["run_id"])
    modes: Any = request.query_params.get("stream_mode")
    if isinstance(run, ForgottenRun):  # its kwargs are no longer known
        modes = modes or "values"
    else:
        modes = modes or run.kwargs.get("stream_mode")
    if isinstance(modes, str) and modes.startswith("["):
        try:
            modes = json.loads(modes)
        except ValueError:
            raise HTTPException(422, f"stream_mode: not a mode or a JSON list: {modes!r}") from None
    if isinstance(run, ForgottenRun):
        return _ended_stream(run, modes)
    if (log := await kept_log(manager, run)) is not None:  # streamed resumably: from Last-Event-ID
        leave = _flag(request, "cancel_on_disconnect")
        on_disconnect = lambda: _left(manager, run, leave)  # noqa: E731
        return join_logged(log, request.headers.get("last-event-id"), on_disconnect)
    subgraphs = bool(run.kwargs.get("stream_subgraphs"))
    adapter = _adapter(modes, subgraphs, run.thread.name)
    cancel = _flag(request, "cancel_on_disconnect")
    return EventSourceResponse(
        await manager.subscribe(run, modes=modes, subgraphs=subgraphs),
        adapter,
        run_id=run.run_id,
        on_disconnect=lambda: _left(manager, run, cancel),
        finish=lambda: _error_of(manager, run),
    )


async def cancel_run(request: Request) -> Response:
    manager = _manager(request)
    params = request.path_params
    run = await manager.find_past(params["thread_id"], params["run_id"], "update")
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise HTTPException(422, f"action: 'interrupt' or 'rollback', not {action!r}")
    wait = _flag(request, "wait")
    if isinstance(run, ForgottenRun):  # it ended long ago: nothing to interrupt
        if action == "rollback":
            raise HTTPException(
                409, f"run {run.run_id} ended and was forgotten: it can no longer be rolled back"
            )
        return JSONResponse(await _past_result(manager, run)) if wait else Response(status_code=202)
    await manager.cancel([run], action=action, wait=wait)
    if not wait:
        return Response(status_code=202)
    return JSONResponse(await manager.result(run) if action != "rollback" else {})


async def cancel_runs(request: Request) -> Response:
    manager = _manager(request)
    body = await read_body(request, RunsCancel)
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise HTTPException(422, f"action: 'interrupt' or 'rollback', not {action!r}")
    if body.status is not None:
        if body.thread_id or body.run_ids:
            raise HTTPException(422, "status: give either status, or thread_id and run_ids")
        wanted = {"pending": ("pending",), "running": ("running",)}.get(
            body.status, ("pending", "running")
        )
        runs = [
            r
            for r in manager.runs.values()
            if r.status in wanted and not r.done.is_set() and await may_thread(r.thread, "update")
        ]
    else:
        if body.thread_id is None or not body.run_ids:
            raise HTTPException(422, "thread_id: give thread_id and run_ids, or status")
        runs = [await manager.find_run(body.thread_id, run_id, "update") for run_id in body.run_ids]
    await manager.cancel(runs, action=action, wait=False)
    return Response(status_code=204)


async def _past_result(manager: RunManager, run: ForgottenRun) -> JSONObject:
    # (Its thread was found for the caller with the run: by its key here.)
    thread = await manager.lookup.find_key(run.thread_id)
    if thread is None:
        raise HTTPException(404, f"thread {run.name!r} not found")
    return await manager.past_result(run, thread)


def _ended_stream(run: ForgottenRun, modes: GivenModes) -> EventSourceResponse:
    """The stream of a run that ended long ago: nothing more (its error, if it failed)."""
    send, receive = anyio.create_memory_object_stream[Event | bytes](0)
    send.close()

    async def finish() -> JSONValue:
        return error_event(run.error, run.status)

    return EventSourceResponse(
        receive,
        _adapter(modes, False, run.name),
        run_id=run.run_id,
        on_disconnect=lambda: None,
        finish=finish,
    )


run_routes = [
    Route("/runs", create_run, methods=["POST"]),
    Route("/runs/stream", stream_run, methods=["POST"]),
    Route("/runs/wait", wait_run, methods=["POST"]),
    Route("/runs/cancel", cancel_runs, methods=["POST"]),
    Route("/threads/{thread_id}/runs", create_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/threads/{thread_id}/runs/stream", stream_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs/wait", wait_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}", delete_run, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", join_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
]

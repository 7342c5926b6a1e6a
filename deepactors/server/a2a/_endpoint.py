"""A2A on ``deepactors serve``: an agent card and a JSON-RPC endpoint per assistant.

``GET /a2a/{assistant_id}/.well-known/agent-card.json`` is the card (give
``.../a2a/{assistant_id}`` to an A2A client as the agent's URL); ``POST
/a2a/{assistant_id}`` answers ``SendMessage``, ``SendStreamingMessage``,
``GetTask``, ``CancelTask`` and ``SubscribeToTask``. A request's
``metadata.deepactors.timeout`` (a deepactors parent's time left) is its run's
timeout. A task is a run: its
``contextId`` the thread (a message without one starts a new thread), its id
the run's. A task stopped for a human is ``input-required``; a message to it
(its ``taskId``) answers: ``approve`` (or yes/ok), anything else rejects with
that as the reason, or a data part ``{"decisions": [...]}`` as for a resume.
As every endpoint of the app: authenticated, each thread its owner's, a
stream counted among the client's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..._core.jsonvalue import JSONValue
from .._authz import may_thread
from .._protocol_runs import (
    ProtocolStream,
    StartedRun,
    manager_of,
    outcome_of,
    run_stream,
    start_run,
    take_stream,
    thread_for,
)
from .._records import RunRecord
from .._runs import RunManager
from ._stream import A2aStream, answer_of, pending_message
from ._wire import TERMINAL, agent_message, card, content_of, state_of, task

__all__ = ["a2a_routes"]

_INVALID_PARAMS = -32602
_TASK_NOT_FOUND = -32001
_NOT_CANCELABLE = -32002
_UNSUPPORTED = -32004
_YES = frozenset({"approve", "approved", "yes", "y", "ok", "allow"})


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def agent_card(request: Request) -> Response:
    """The assistant's agent card."""
    manager = manager_of(request)
    assistant = manager.assistant(request.path_params["assistant_id"])
    url = str(request.url_for("a2a_rpc", assistant_id=assistant.graph_id))
    description = assistant.description or f"the deepactors agent {assistant.graph_id!r}"
    skill: dict[str, object] = {
        "id": assistant.graph_id,
        "name": assistant.graph_id,
        "description": description,
        "tags": ["deepactors"],
    }
    return JSONResponse(
        card(name=assistant.graph_id, description=description, url=url, skills=[skill])
    )


async def rpc(request: Request) -> Response:
    """One JSON-RPC request (see the module docstring)."""
    manager = manager_of(request)
    assistant_id = manager.assistant(request.path_params["assistant_id"]).graph_id
    try:
        body = await request.json()
    except ValueError:
        return _error(None, -32700, "parse error: the body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("method"), str):
        return _error(None, -32600, "invalid request: a JSON-RPC request object")
    request_id = body.get("id")
    given = body.get("params")
    params: dict[str, object] = given if isinstance(given, dict) else {}
    try:
        match body["method"]:
            case "SendMessage":
                return await _send(request, manager, assistant_id, request_id, params)
            case "SendStreamingMessage":
                return await _stream(request, manager, assistant_id, request_id, params)
            case "GetTask":
                run = await _run(manager, params)
                return _result(request_id, await _task(run, params))
            case "CancelTask":
                return _result(request_id, await _cancel(manager, await _run(manager, params)))
            case "SubscribeToTask":
                return await _subscribe(request, manager, request_id, await _run(manager, params))
            case method:
                return _error(request_id, -32601, f"method not found: {method}")
    except _RpcError as exc:
        return _error(request_id, exc.code, exc.message)
    except HTTPException as exc:
        if exc.status_code in (401, 403, 503, 429):
            raise
        return _error(request_id, _INVALID_PARAMS, str(exc.detail))


def _result(request_id: object, result: object) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})


def _error(request_id: object, code: int, message: str) -> JSONResponse:
    error = {"code": code, "message": message}
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


async def _run(manager: RunManager, params: Mapping[str, object]) -> RunRecord:
    """The task ``params["id"]`` names: a run of a thread the caller may read."""
    task_id = params.get("id")
    run = manager.runs.get(task_id) if isinstance(task_id, str) else None
    if run is None or run.thread.temporary or not await may_thread(run.thread, "read"):
        raise _RpcError(_TASK_NOT_FOUND, f"task {task_id!r} not found")
    return run


async def _start(
    manager: RunManager, assistant_id: str, params: Mapping[str, object]
) -> tuple[RunRecord, StartedRun, dict[str, object]]:
    """Create the run a message asks for: a new turn, or an answer to a waiting task."""
    message = params.get("message")
    if not isinstance(message, dict):
        raise _RpcError(_INVALID_PARAMS, "params.message: the message to send")
    context_id = message.get("contextId") or str(uuid.uuid4())
    thread = await thread_for(manager, context_id)
    user = {**message, "contextId": context_id, "role": "ROLE_USER"}
    timeout = _timeout(params)
    waiting = message.get("taskId")
    if isinstance(waiting, str) and waiting:
        run = await _run(manager, {"id": waiting})
        if run.thread is not thread or state_of(run) != "TASK_STATE_INPUT_REQUIRED":
            raise _RpcError(_UNSUPPORTED, f"task {waiting!r} is not waiting for input")
        interrupts = (run.result or {}).get("__interrupt__")
        resume = _decisions(message, len(interrupts) if isinstance(interrupts, list) else 0)
        started = await start_run(
            manager, thread, assistant_id=assistant_id, resume=resume, timeout=timeout
        )
    else:
        content = content_of(message)
        turn = {"role": "user", "content": content}
        if isinstance(message.get("messageId"), str):
            turn["id"] = message["messageId"]
        started = await start_run(
            manager, thread, assistant_id=assistant_id, messages=[turn], timeout=timeout
        )
    return started.run, started, user


def _timeout(params: Mapping[str, object]) -> float | None:
    """The deadline a deepactors parent sent (``metadata.deepactors.timeout``), if any."""
    metadata = params.get("metadata")
    ours = metadata.get("deepactors") if isinstance(metadata, Mapping) else None
    value = ours.get("timeout") if isinstance(ours, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


def _decisions(
    message: Mapping[str, object], pending: int
) -> dict[str, object] | list[dict[str, str]]:
    given = message.get("parts")
    parts = given if isinstance(given, list) else []
    for part in parts:
        data = part.get("data") if isinstance(part, Mapping) else None
        if isinstance(data, Mapping) and "decisions" in data:
            return {"decisions": data["decisions"]}
    text = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping)).strip()
    if text.lower() in _YES:
        return [{"type": "approve"}] * max(pending, 1)
    return [{"type": "reject", "message": text or "rejected"}] * max(pending, 1)


async def _send(
    request: Request,
    manager: RunManager,
    assistant_id: str,
    request_id: object,
    params: Mapping[str, object],
) -> Response:
    run, started, user = await _start(manager, assistant_id, params)
    started.events.close()  # nobody streams it: its record says how it ended
    manager.launch(run)
    configuration = params.get("configuration") or {}
    if isinstance(configuration, dict) and configuration.get("returnImmediately"):
        return _result(
            request_id, {"task": task(run, state="TASK_STATE_SUBMITTED", history=[user])}
        )
    await outcome_of(run)
    return _result(request_id, {"task": await _task(run, {}, user=user)})


def _pending_calls(run: RunRecord) -> list[dict[str, JSONValue]]:
    """What the run stopped for: the calls its final values' interrupts (as
    LangGraph shows them) ask about, each its tool and args."""
    interrupts = (run.result or {}).get("__interrupt__")
    calls: list[dict[str, JSONValue]] = []
    for pending in interrupts if isinstance(interrupts, list) else ():
        value = pending.get("value") if isinstance(pending, dict) else None
        asks = value.get("action_requests") if isinstance(value, dict) else None
        for ask in asks if isinstance(asks, list) else ():
            if isinstance(ask, dict):
                calls.append({"tool": ask["name"], "args": ask["args"]})
    return calls


async def _task(
    run: RunRecord, params: Mapping[str, object], *, user: Mapping[str, object] | None = None
) -> dict[str, object]:
    state = state_of(run)
    ids = {"task_id": run.run_id, "context_id": run.thread.thread_id}
    message: dict[str, object] | None = None
    answer: str | None = None
    if state == "TASK_STATE_INPUT_REQUIRED":
        message = pending_message(_pending_calls(run), **ids)
    elif state == "TASK_STATE_COMPLETED":
        answer = answer_of(run.result)
        message = agent_message(answer, message_id=f"{run.run_id}-answer", **ids)
    elif state == "TASK_STATE_FAILED":
        error = (run.result or {}).get("__error__")
        late = "the run passed its deadline" if run.status == "timeout" else "the run failed"
        text = str((error.get("message") if isinstance(error, dict) else None) or late)
        message = agent_message(text, message_id=f"{run.run_id}-error", **ids)
    history = [user] if user is not None else []
    return task(run, state=state, history=history, answer=answer, message=message)


async def _cancel(manager: RunManager, run: RunRecord) -> dict[str, object]:
    if not await may_thread(run.thread, "update"):
        raise _RpcError(_TASK_NOT_FOUND, f"task {run.run_id!r} not found")
    if state_of(run) in TERMINAL or run.done.is_set():
        raise _RpcError(_NOT_CANCELABLE, f"task {run.run_id!r} has ended")
    await manager.cancel([run], wait=True)
    return await _task(run, {})


async def _stream(
    request: Request,
    manager: RunManager,
    assistant_id: str,
    request_id: object,
    params: Mapping[str, object],
) -> Response:
    release = take_stream(request)
    try:
        run, started, user = await _start(manager, assistant_id, params)
    except BaseException:
        release()
        raise
    translator = A2aStream(request_id, run, user, root=run.assistant.agent.name)
    return run_stream(manager, started, translator, release=release)


async def _subscribe(
    request: Request, manager: RunManager, request_id: object, run: RunRecord
) -> Response:
    if run.done.is_set():
        raise _RpcError(_UNSUPPORTED, f"task {run.run_id!r} has ended: GetTask reads it")
    release = take_stream(request)
    try:
        events = await manager.subscribe(run, modes=None, subgraphs=True)
    except BaseException:
        release()
        raise
    user: dict[str, object] = {"role": "ROLE_USER", "parts": []}
    translator = A2aStream(request_id, run, user, root=run.assistant.agent.name)
    return ProtocolStream(
        events,
        translator,
        launch=lambda: None,
        leave=lambda: None,  # a subscriber leaving does not stop the task
        outcome=lambda: outcome_of(run),
        release=release,
    )


a2a_routes = [
    Route("/a2a/{assistant_id}/.well-known/agent-card.json", agent_card, methods=["GET"]),
    Route("/a2a/{assistant_id}", rpc, methods=["POST"], name="a2a_rpc"),
]

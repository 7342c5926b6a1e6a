"""``POST /threads/{thread_id}/commands``: the v3 session's commands, JSON in, JSON out.

Served: ``run.start`` (the thread made for the caller if it has none: the SDK
mints its id), ``input.respond`` (resumes the thread's pending interrupt, as
``Command(resume=...)`` does on the runs endpoints), ``state.get``,
``state.listCheckpoints`` and ``agent.getTree``. A command this server does
not do is answered with the protocol's ``ErrorResponse`` (``not_supported``,
``unknown_command``), as is a bad one (``invalid_argument``, ``no_such_...``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._checkpoints import superseded_history
from .._protocol_runs import manager_of, thread_for
from .._records import ThreadRecord, iso
from .._runs import RunManager
from .._schemas import RunCreate, refuse_non_finite
from .._threads_api import state_at
from ..auth import Action
from ._session import Sessions

__all__ = ["CommandError", "run_command", "sessions_of"]

_NOT_HERE = {
    "subscription.subscribe": "subscriptions are made by the event stream's own request here "
    "(POST /threads/{id}/stream/events with the filter): the WebSocket transport is not served",
    "subscription.unsubscribe": "close the event stream instead (the WebSocket transport is "
    "not served)",
    "subscription.reconnect": "reopen the event stream with since=<last seq> instead (the "
    "WebSocket transport is not served)",
    "input.inject": "a message is sent to a thread by run.start with it as input",
    "state.fork": "fork with runs.create(checkpoint_id=...) on the runs endpoints",
}


@final
class CommandError(Exception):
    """A command answered with the protocol's ``ErrorResponse``.

    Args:
        code: The protocol's error code (``invalid_argument``, ``not_supported``...).
        message: What was wrong, for a person.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def sessions_of(request: Request) -> Sessions:
    """The app's thread sessions (made with the first request that needs them)."""
    state = request.app.state
    manager = manager_of(request)
    sessions: Sessions | None = getattr(state, "thread_sessions", None)
    if sessions is None or sessions.manager is not manager:  # (an app served again)
        sessions = state.thread_sessions = Sessions(manager)
    return sessions


class _Context:
    """What a command handler works with."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.manager: RunManager = manager_of(request)
        self.thread_id: str = request.path_params["thread_id"]
        self.sessions = sessions_of(request)

    async def thread(self, action: Action = "read") -> ThreadRecord:
        return await self.manager.lookup.thread(self.thread_id, action)


Result = tuple[dict[str, object], int | None]
"""A command's ``result`` and the session's seq it is current at (None: no session)."""
Handler = Callable[[_Context, Mapping[str, object]], Awaitable[Result]]


async def run_command(request: Request) -> Response:
    """Answer one command (see the module docstring)."""
    raw = await request.body()
    refuse_non_finite(raw)  # a 422 naming it: JSON has no NaN, and runs' input is stored
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        payload = None
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("id"), int)
        or isinstance(payload.get("id"), bool)
        or not isinstance(payload.get("method"), str)
    ):
        command_id = payload.get("id") if isinstance(payload, dict) else None
        message = "a command is a JSON object with an integer id and a string method"
        return _error(command_id, "invalid_argument", message, status=400)
    command_id, method = payload["id"], payload["method"]
    params = payload.get("params", {})
    if not isinstance(params, dict):
        return _error(command_id, "invalid_argument", f"{method}: params must be an object")
    handler = _HANDLERS.get(method)
    if handler is None:
        if method in _NOT_HERE:
            return _error(command_id, "not_supported", f"{method}: {_NOT_HERE[method]}")
        known = ", ".join(sorted([*_HANDLERS, *_NOT_HERE]))
        return _error(command_id, "unknown_command", f"unknown command {method!r}; known: {known}")
    try:
        result, seq = await handler(_Context(request), params)
    except CommandError as exc:
        return _error(command_id, exc.code, f"{method}: {exc.message}")
    body: dict[str, object] = {"type": "success", "id": command_id, "result": result}
    if seq is not None:
        body["meta"] = {"applied_through_seq": seq}
    return JSONResponse(body)


def _error(command_id: object, code: str, message: str, *, status: int = 200) -> Response:
    body = {"type": "error", "id": command_id, "error": code, "message": message}
    return JSONResponse(body, status_code=status)


# -- runs --------------------------------------------------------------------------


async def _run_start(ctx: _Context, params: Mapping[str, object]) -> tuple[dict[str, object], int]:
    assistant = params.get("assistant_id")
    if not isinstance(assistant, str) or not assistant:
        raise CommandError("invalid_argument", "assistant_id: the assistant to run (a string)")
    run_input = params.get("input")
    if run_input is not None and not isinstance(run_input, dict):
        raise CommandError("invalid_argument", "input: an object of the graph's input channels")
    body: dict[str, object] = {"assistant_id": assistant, "input": run_input}
    thread = await thread_for(ctx.manager, ctx.thread_id)  # the SDK mints the id: made here
    return await _start(ctx, thread, _with_options(body, params))


async def _input_respond(
    ctx: _Context, params: Mapping[str, object]
) -> tuple[dict[str, object], int]:
    entries = params.get("responses")
    if entries is None:
        entries = [params]
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict):
        raise CommandError(
            "invalid_argument",
            "one response: a thread here has one interrupt pending at a time (a stop's "
            "requests share its interrupt_id; answer them with one response)",
        )
    entry = entries[0]
    interrupt_id = entry.get("interrupt_id")
    if not isinstance(interrupt_id, str) or "response" not in entry:
        raise CommandError("invalid_argument", "interrupt_id (a string) and response are needed")
    thread = await ctx.thread("update")
    name = ctx.manager.lookup.thread_assistant(thread).agent.name
    state = await state_at(ctx.manager.handle(thread), name, None)
    pending = [i["id"] for i in state["interrupts"]]
    if interrupt_id not in pending:
        raise CommandError(
            "no_such_interrupt",
            f"the thread has no pending interrupt {interrupt_id!r} (pending: {pending})",
        )
    command: dict[str, object] = {"resume": entry["response"]}
    for key in ("update", "goto"):
        if params.get(key) is not None:
            command[key] = params[key]
    body: dict[str, object] = {"assistant_id": thread.graph_id or name, "command": command}
    return await _start(ctx, thread, _with_options(body, params))


def _with_options(body: dict[str, object], params: Mapping[str, object]) -> dict[str, object]:
    for key in ("config", "metadata"):
        if params.get(key) is not None:
            body[key] = params[key]
    return body


async def _start(
    ctx: _Context, thread: ThreadRecord, body: Mapping[str, object]
) -> tuple[dict[str, object], int]:
    """Create the run, let the thread's session follow it from its first event, start it."""
    try:
        run_body = RunCreate.model_validate(body)
    except ValueError as exc:
        raise CommandError("invalid_argument", str(exc)) from None
    try:
        run = await ctx.manager.create(thread, run_body, launch=False)
    except HTTPException as exc:
        code = _CODES.get(exc.status_code)
        if code is None:
            raise  # the server's own state (busy, shutting down): the HTTP status says it
        raise CommandError(code, str(exc.detail)) from None
    # Made after the run is (so a refused run leaves no session behind), and
    # subscribed to before it is launched: the session sees its every event.
    session = ctx.sessions.of(thread)
    session.start(run)
    ctx.manager.launch(run)
    return {"run_id": run.run_id}, session.seq


_CODES = {403: "permission_denied", 404: "invalid_argument", 409: "invalid_argument"}
_CODES[422] = "invalid_argument"


# -- state and agents ----------------------------------------------------------------


def _root_only(params: Mapping[str, object]) -> None:
    namespace = params.get("namespace", [])
    if namespace not in ([], None):
        raise CommandError(
            "no_such_namespace",
            f"namespace {namespace!r}: a subagent's state is not kept apart here (its "
            "result is the root's); ask for the root's ([])",
        )


async def _state_get(ctx: _Context, params: Mapping[str, object]) -> tuple[dict[str, object], None]:
    _root_only(params)
    keys = params.get("keys")
    if keys is not None and not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise CommandError("invalid_argument", "keys: a list of state keys")
    thread = await ctx.thread()
    name = ctx.manager.lookup.thread_assistant(thread).agent.name
    state = await state_at(ctx.manager.handle(thread), name, None)
    values = state["values"]
    if keys is not None:
        values = {k: v for k, v in values.items() if k in keys}
    result: dict[str, object] = {"values": values}
    if state["checkpoint_id"] is not None:
        result["checkpoint"] = {"id": state["checkpoint_id"]}
    return result, None


async def _list_checkpoints(
    ctx: _Context, params: Mapping[str, object]
) -> tuple[dict[str, object], None]:
    _root_only(params)
    limit = params.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise CommandError("invalid_argument", f"limit: a positive integer, not {limit!r}")
    before = params.get("before")
    if before is not None and not (isinstance(before, str) and before.isdigit()):
        raise CommandError(
            "invalid_argument", f"before: a checkpoint id of this server, not {before!r}"
        )
    thread = await ctx.thread()
    handle = ctx.manager.handle(thread)
    name = ctx.manager.lookup.thread_assistant(thread).agent.name
    created = {r.seq: r.created_at for r in await handle.history(superseded=True)}
    out: list[dict[str, object]] = []
    for seq, parent in await superseded_history(handle, name):
        if before is not None and seq >= int(before):
            continue
        summary: dict[str, object] = {"id": str(seq), "timestamp": iso(created[seq]), "step": seq}
        summary["metadata"] = {"parent_id": str(parent) if parent is not None else None}
        out.append(summary)
        if len(out) >= limit:
            break
    return {"checkpoints": out}, None


async def _agent_tree(
    ctx: _Context, params: Mapping[str, object]
) -> tuple[dict[str, object], int | None]:
    thread = await ctx.thread()
    session = ctx.sessions.find(thread)
    if session is not None:
        return {"tree": session.tree()}, session.seq
    root: dict[str, object] = {
        "namespace": [],
        "status": "running" if thread.inflight else "completed",
        "graph_name": thread.graph_id or ctx.manager.lookup.thread_assistant(thread).agent.name,
        "children": [],
    }
    return {"tree": root}, None


_HANDLERS: dict[str, Handler] = {
    "run.start": _run_start,
    "input.respond": _input_respond,
    "state.get": _state_get,
    "state.listCheckpoints": _list_checkpoints,
    "agent.getTree": _agent_tree,
}

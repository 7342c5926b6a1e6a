"""What a run is started with: a request body's input and limits, validated once, and its echo.

A run's limits are read from its request's ``config`` by
:meth:`Limits.from_config <deepactors.limits.Limits.from_config>`:
LangGraph's ``recursion_limit``, and the time and budget a remote subagent's
parent sends under ``config.configurable.deepactors_limits`` (see
:mod:`deepactors.remote._limits`), so the child stops here at its parent's
deadline and within its parent's budget even if the parent's process is gone.
A run past its timeout ends with status ``timeout``; one whose budget refused
a call ends with the budget's report in its metadata, as any budgeted run.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException

from .._core.jsonvalue import JSONObject
from ..actors import RunInput, prepare_input
from ..agent import DeepAgent
from ..errors import InputError
from ..interrupts import END_PENDING
from ..limits import Breakpoints, Limits
from ..tools import Command
from ._records import ThreadRecord, ThreadValues
from ._schemas import RunCreate

__all__ = [
    "check_goto",
    "error_json",
    "error_result",
    "prepare_run_input",
    "run_input_of",
    "run_kwargs",
]


def prepare_run_input(
    agent: DeepAgent,
    input: object,
    thread_id: str | None,
    identity: object = None,
    limits: Limits | None = None,
    *,
    breakpoints: Breakpoints | None = None,
    stateless: bool = False,
) -> RunInput:
    try:
        return prepare_input(
            agent.spec,
            input,
            thread_id,
            identity=identity,
            limits=limits,
            breakpoints=breakpoints,
            stateless=stateless,
        )
    except InputError as exc:
        raise HTTPException(422, f"input: {exc}") from None


def run_input_of(
    agent: DeepAgent,
    body: RunCreate,
    thread_id: str | None,
    identity: object = None,
    *,
    stateless: bool = False,
) -> tuple[RunInput, float | None]:
    """The run's input (its limits in it) and its timeout (None: none);
    ``stateless``: its thread is thrown away when it ends.

    Raises:
        HTTPException: 422, an input or limits that are not (nothing was started).
    """
    try:
        limits = Limits.from_config(body.config)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    command = body.command
    if command is None:
        given: object = body.input
    elif command.ends:  # goto __end__: every pending call answered as not run, no model call
        given = Command(resume=END_PENDING)
    else:  # its update applied first, then its resume, or on at its node
        # (refuse_unsupported let through an update that is an object or empty)
        update = command.update if isinstance(command.update, dict) else None
        given = Command(resume=command.resume, update=update or None, goto=command.node)
    run_input = prepare_run_input(agent, given, thread_id, identity, limits, stateless=stateless)
    before, after = body.interrupt_before, body.interrupt_after
    if before is None and after is None:
        return run_input, limits.timeout
    if thread_id is None:
        if before or after:
            raise HTTPException(
                422,
                "interrupt_before/interrupt_after stop a run to continue it on its thread, "
                "but a stateless run's thread is thrown away when it ends: run it on a thread "
                "(threads.create(), then runs on that thread_id)",
            )
        return run_input, limits.timeout
    try:
        stops = agent.spec.breakpoints.over(before, after)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    return prepare_run_input(agent, run_input, thread_id, breakpoints=stops), limits.timeout


def run_kwargs(body: RunCreate) -> dict[str, object]:
    kwargs = body.model_dump(
        include={
            "input",
            "command",
            "config",
            "context",
            "stream_mode",
            "stream_subgraphs",
            "interrupt_before",
            "interrupt_after",
        },
        mode="json",
    )
    if body.stream_resumable:  # its frames are kept: a rejoin elsewhere reads them
        kwargs["stream_resumable"] = True
    return kwargs


def error_json(exc: BaseException) -> dict[str, str]:
    return {"error": type(exc).__name__, "message": str(exc)}


def error_result(exc: BaseException) -> JSONObject:
    """A failed run's result: its error (:func:`error_json`) under ``__error__``."""
    return {"__error__": {"error": type(exc).__name__, "message": str(exc)}}


def check_goto(thread: ThreadRecord, node: str, saved: ThreadValues) -> None:
    """Refuse now (422) a ``command.goto`` the thread cannot go on with, saying why."""
    if saved.values is None:
        raise HTTPException(422, f"command.goto: thread {thread.name!r} has no saved state")
    waiting = saved.next == ("tools",)
    if node == "tools" and not waiting:
        raise HTTPException(
            422,
            f"command.goto 'tools': thread {thread.name!r} has no tool call waiting to run "
            "(its model's last answer made none, or they all have results)",
        )
    if node == "model" and waiting:
        raise HTTPException(
            422,
            f"command.goto 'model': thread {thread.name!r} has tool calls without results; "
            "goto 'tools' runs them, or resume them first",
        )

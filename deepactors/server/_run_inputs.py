"""What a run is started with: a request body's input, validated once, and its echo."""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.exceptions import HTTPException

from ..actors import RunInput, prepare_input
from ..agent import DeepAgent
from ..errors import InputError
from ..interrupts import END_PENDING
from ..tools import Command
from ._schemas import RunCreate

__all__ = [
    "error_json",
    "prepare_run_input",
    "run_input_of",
    "run_kwargs",
]


def prepare_run_input(
    agent: DeepAgent, input: Any, thread_id: str | None, identity: object = None
) -> RunInput:
    try:
        return prepare_input(agent.spec, input, thread_id, identity=identity)
    except InputError as exc:
        raise HTTPException(422, f"input: {exc}") from None


def run_input_of(
    agent: DeepAgent, body: RunCreate, thread_id: str | None, identity: object = None
) -> RunInput:
    command = body.command
    if command is None:
        given: Any = body.input
    else:  # goto __end__: every pending call answered as not run, no model call
        given = Command(resume=END_PENDING if command.ends else command.resume)
    run_input = prepare_run_input(agent, given, thread_id, identity)
    limit = (body.config or {}).get("recursion_limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
            raise HTTPException(422, f"config.recursion_limit: an integer >= 2, not {limit!r}")
        # One agent turn is two LangGraph steps (model, then tools).
        run_input = dataclasses.replace(run_input, max_steps=limit // 2)
    return run_input


def run_kwargs(body: RunCreate) -> dict[str, Any]:
    kwargs = body.model_dump(
        include={"input", "command", "config", "context", "stream_mode", "stream_subgraphs"},
        mode="json",
    )
    if body.stream_resumable:  # its frames are kept: a rejoin elsewhere reads them
        kwargs["stream_resumable"] = True
    return kwargs


def error_json(exc: BaseException) -> dict[str, str]:
    return {"error": type(exc).__name__, "message": str(exc)}

"""What a run is started with, and what is done to a thread's checkpoint around runs."""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.exceptions import HTTPException

from ..actors import RunInput, open_runtime, prepare_input
from ..agent import DeepAgent
from ..errors import InputError
from ..persistence import CheckpointWrite
from ..tools import Command
from ._schemas import RunCreate

__all__ = [
    "error_json",
    "last_seq",
    "prepare_run_input",
    "reread",
    "roll_back",
    "run_input_of",
    "run_kwargs",
]


def prepare_run_input(agent: DeepAgent, input: Any, thread_id: str | None) -> RunInput:
    try:
        return prepare_input(agent.spec, input, thread_id)
    except InputError as exc:
        raise HTTPException(422, f"input: {exc}") from None


def run_input_of(agent: DeepAgent, body: RunCreate, thread_id: str | None) -> RunInput:
    run_input = prepare_run_input(
        agent,
        Command(resume=body.command.resume) if body.command is not None else body.input,
        thread_id,
    )
    limit = (body.config or {}).get("recursion_limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
            raise HTTPException(422, f"config.recursion_limit: an integer >= 2, not {limit!r}")
        # One agent turn is two LangGraph steps (model, then tools).
        run_input = dataclasses.replace(run_input, max_steps=limit // 2)
    return run_input


def run_kwargs(body: RunCreate) -> dict[str, Any]:
    return body.model_dump(
        include={"input", "command", "config", "context", "stream_mode", "stream_subgraphs"},
        mode="json",
    )


def error_json(exc: BaseException) -> dict[str, str]:
    return {"error": type(exc).__name__, "message": str(exc)}


async def last_seq(agent: DeepAgent, thread_id: str) -> int:
    checkpointer = agent.checkpointer
    assert checkpointer is not None
    records = await checkpointer.read(thread_id)
    return records[-1].seq if records else 0


async def reread(agent: DeepAgent, thread_id: str) -> None:
    """Make the app runtime's actor of this thread read it again from its checkpoint.

    A thread actor keeps its state in memory and reads the checkpoint again only
    when another actor has run the thread since; an empty update through a
    runtime of its own is such a run (and takes its turn like any other).
    """
    async with open_runtime() as rt:
        handle = await rt.start(agent, RunInput(values={}, update_only=True), thread_id=thread_id)
        await handle.wait()


async def roll_back(agent: DeepAgent, thread_id: str, seq: int) -> None:
    """Take the thread's checkpoint back to ``seq`` (0: nothing), then re-read it."""
    checkpointer = agent.checkpointer
    assert checkpointer is not None
    keep = await checkpointer.read(thread_id, upto_seq=seq) if seq else []
    await checkpointer.delete_thread(thread_id)
    if keep:
        writes = [CheckpointWrite(path=r.path, step=r.step, kind=r.kind, data=r.data) for r in keep]
        await checkpointer.put(thread_id, writes)
    await reread(agent, thread_id)

"""LangGraph's ``tasks`` and ``checkpoints`` stream modes, from an agent's steps.

LangGraph runs a deep agent as a graph of two nodes, ``model`` and ``tools``;
each step (superstep) runs one of them as a *task* and ends in a *checkpoint*.
``stream_mode="tasks"`` streams each task as it starts (its id, node, input and
triggers) and as it ends (its writes as ``result``); ``"checkpoints"`` streams
each checkpoint (its config, values, metadata, the nodes ``next``, its tasks).
Here a step is what :class:`~deepactors.langchain.views.LangGraphStream` already
streams as one ``updates`` part: a model answer, or a turn's tool results.

Ids are derived from the run, the actor and the step (uuid5), so a rejoining
client sees the same ids again; they name steps of the stream, not records of
the checkpointer (``get_state`` and ``history`` give those).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

__all__ = ["checkpoint_payload", "step_id", "task_result", "task_start"]


def step_id(run_id: str, path: str, step: int, what: str) -> str:
    """A stable id of one task or checkpoint of an actor's run."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{run_id}/{path}/{step}/{what}"))


def task_start(task: str, node: str, state: object) -> dict[str, object]:
    """A task as it starts (LangGraph's ``TaskPayload``)."""
    return {"id": task, "name": node, "input": state, "triggers": [f"branch:to:{node}"]}


def task_result(task: str, node: str, writes: object) -> dict[str, object]:
    """A task as it ends (LangGraph's ``TaskResultPayload``): its writes by channel."""
    return {"id": task, "name": node, "error": None, "result": writes, "interrupts": []}


def checkpoint_payload(
    *,
    thread_id: str | None,
    namespace: Sequence[str],
    checkpoint: str,
    parent: str | None,
    values: object,
    step: int,
    source: str,
    next_nodes: Sequence[str],
    tasks: Sequence[Mapping[str, object]],
) -> dict[str, object]:
    """A checkpoint as LangGraph streams it (``CheckpointPayload``)."""

    def config(checkpoint_id: str) -> dict[str, object]:
        configurable = {"checkpoint_ns": "|".join(namespace), "checkpoint_id": checkpoint_id}
        if thread_id is not None:
            configurable["thread_id"] = thread_id
        return {"configurable": configurable}

    return {
        "config": config(checkpoint),
        "parent_config": None if parent is None else config(parent),
        "values": values,
        "metadata": {"source": source, "step": step, "parents": {}},
        "next": list(next_nodes),
        "tasks": list(tasks),
    }

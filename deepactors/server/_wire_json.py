"""The Agent Protocol's resources as JSON: what the server writes, key by key.

``langgraph-sdk`` reads these shapes (``Assistant``, ``Thread``, ``Run``, a
thread's state and its checkpoints); :mod:`._records` keeps the records they are
written from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired, TypeAlias, TypedDict

from .._core.jsonvalue import JSONObject

__all__ = [
    "TTLJSON",
    "AssistantJSON",
    "CheckpointJSON",
    "GivenModes",
    "RunJSON",
    "RunStatus",
    "StateJSON",
    "TTLStrategy",
    "ThreadJSON",
    "ThreadStatus",
]

RunStatus: TypeAlias = Literal["pending", "running", "error", "success", "timeout", "interrupted"]
ThreadStatus: TypeAlias = Literal["idle", "busy", "interrupted", "error"]
GivenModes: TypeAlias = str | Sequence[str] | None
"""Stream modes as a client names them: one, a list, or none (the default); read
by :func:`~deepactors.langchain.views.parse_stream_modes`."""
TTLStrategy: TypeAlias = Literal["delete", "keep_latest"]
"""What the server does with a thread whose time to live has passed."""


class CheckpointJSON(TypedDict):
    """A checkpoint as LangGraph's server writes one (``checkpoint_id`` is its seq)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    checkpoint_map: None


class StateJSON(TypedDict):
    """A thread's state at a checkpoint, as ``GET /threads/{id}/state`` answers it."""

    values: JSONObject
    next: list[str]
    tasks: list[dict[str, object]]
    metadata: dict[str, object]
    created_at: str | None
    checkpoint: CheckpointJSON | None
    parent_checkpoint: CheckpointJSON | None
    interrupts: list[JSONObject]
    checkpoint_id: str | None
    parent_checkpoint_id: str | None


class AssistantJSON(TypedDict):
    """The protocol's ``Assistant``, as :meth:`AssistantRecord.to_json` writes it."""

    assistant_id: str
    graph_id: str
    config: dict[str, object]
    context: dict[str, object]
    created_at: str
    updated_at: str
    metadata: dict[str, str]
    version: int
    name: str
    description: str | None


class TTLJSON(TypedDict):
    """A thread's time to live, as ``GET /threads/{id}?include=ttl`` shows it."""

    strategy: TTLStrategy
    ttl: float  # minutes
    expires_at: str


class ThreadJSON(TypedDict):
    """The protocol's ``Thread``, as :meth:`ThreadRecord.to_json` writes it."""

    thread_id: str
    created_at: str
    updated_at: str
    state_updated_at: str
    metadata: dict[str, object]
    status: ThreadStatus
    config: dict[str, object]
    values: JSONObject | None
    interrupts: dict[str, list[JSONObject]]
    ttl: NotRequired[TTLJSON | None]  # with ``?include=ttl``


class RunJSON(TypedDict):
    """The protocol's ``Run``, as :meth:`RunRecord.to_json` writes it."""

    run_id: str
    thread_id: str
    assistant_id: str
    created_at: str
    updated_at: str
    status: RunStatus
    metadata: dict[str, object]
    multitask_strategy: str
    kwargs: dict[str, object]

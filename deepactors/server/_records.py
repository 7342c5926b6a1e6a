"""What the server keeps about assistants, threads and runs, and their wire JSON.

These are the Agent Protocol's resources as ``langgraph-sdk`` reads them
(``Assistant``, ``Thread``, ``Run``). Thread *state* lives in the agents'
checkpointer and is read through the thread's handle (:class:`ThreadValues`, as
the protocol shows it); a :class:`ThreadRecord` only holds what the protocol
adds around it (metadata, its runs, whether the last one failed) and is kept in
memory.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from .._core.jsonvalue import JSONObject
from ..actors import RunHandle
from ..agent import DeepAgent
from ..events import Event
from ._wire_json import (
    TTLJSON,
    AssistantJSON,
    RunJSON,
    RunStatus,
    StateJSON,
    ThreadJSON,
    ThreadStatus,
    TTLStrategy,
)

__all__ = [
    "FORGOTTEN_PER_THREAD",
    "NO_VALUES",
    "AssistantRecord",
    "ForgottenRun",
    "RunRecord",
    "StateUpdated",
    "Subscriber",
    "ThreadRecord",
    "ThreadStreamMode",
    "ThreadValues",
    "iso",
    "new_uuid",
    "public_id",
]

_ASSISTANT_NS = uuid.UUID("6f1c4a5e-2d0b-4c58-9a43-5d6b2f1e8a11")


def new_uuid() -> str:
    """A fresh random id in the protocol's format (a version 4 UUID).

    What ``str(uuid.uuid4())`` gives, from the same 16 random bytes of the
    OS, at less than half its cost (no ``UUID`` object): two per streamed run.
    """
    h = os.urandom(16).hex()
    # The version nibble is 4; the variant's top two bits are 10 (RFC 4122).
    variant = "89ab"[int(h[16], 16) & 3]
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"


def iso(seconds: float) -> str:
    """An ISO 8601 UTC timestamp, as the protocol writes times."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantRecord:
    """One served agent.

    Attributes:
        graph_id: The name it is served under (also accepted as an assistant id).
        assistant_id: A stable UUID derived from the name.
        agent: The agent, with the server's checkpointer and store.
        description: Shown to clients.
        stateless: The agent without a checkpointer, for stateless runs.
    """

    graph_id: str
    agent: DeepAgent
    description: str | None = None
    created_at: float = field(default_factory=time.time)
    stateless: DeepAgent = field(init=False)
    assistant_id: str = field(init=False)

    def __post_init__(self) -> None:
        # Stateless runs keep nothing: the same agent without a checkpointer
        # runs them as one-shot actors, with no journal to write or delete.
        spec = dataclasses.replace(self.agent.spec, checkpointer=None)
        object.__setattr__(self, "stateless", DeepAgent(spec))
        object.__setattr__(self, "assistant_id", str(uuid.uuid5(_ASSISTANT_NS, self.graph_id)))

    def to_json(self) -> AssistantJSON:
        """The protocol's ``Assistant``."""
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "config": {},
            "context": {},
            "created_at": iso(self.created_at),
            "updated_at": iso(self.created_at),
            "metadata": {"created_by": "system"},
            "version": 1,
            "name": self.graph_id,
            "description": self.description,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadValues:
    """A thread's saved state as the protocol shows it: JSON in LangGraph's shapes.

    Attributes:
        values: The channel values (None: nothing saved yet).
        interrupts: The pending interrupts.
        stopped: The thread stopped at a breakpoint (``interrupt_before``/``after``).
        next: What a continued thread runs first (``"model"``, ``"tools"``; empty: done).
    """

    values: JSONObject | None = None
    interrupts: list[JSONObject] = field(default_factory=list)
    stopped: bool = False
    next: tuple[str, ...] = ()

    def joined(self) -> JSONObject:
        """What joining a run answers: the values, with ``__interrupt__`` if any."""
        values = dict(self.values or {})
        if self.interrupts:
            values["__interrupt__"] = [*self.interrupts]
        return values


NO_VALUES = ThreadValues()
"""What a thread with nothing saved (or a stateless run's) shows."""


@dataclass(slots=True, kw_only=True, eq=False, weakref_slot=True)
class ThreadRecord:
    """A thread as the protocol sees it; its state is in the checkpointer.

    Attributes:
        thread_id: Its key: what the checkpointer, the runs database and the
            sandboxes know it by (its id, or ``<owner>/<id>``: see :attr:`name`).
        graph_id: The assistant whose runs the thread holds (None: never run).
        error: Its last run failed.
        temporary: Made for a stateless run; deleted when that run ends.
        runs: Its runs in memory (in flight, or finished less than the
            retention period ago), oldest first. Only the thread holds them
            (with the manager's table): a run points to its thread, and a run
            that leaves this list is freed by reference counting.
        forgotten: What is left of its runs that finished longer ago, by id
            (see :class:`ForgottenRun`), at most :data:`FORGOTTEN_PER_THREAD`.
        watchers: The joins of its stream (``GET /threads/{id}/stream``): each
            is told of every run started and state update (see :meth:`tell`).
        ttl: Seconds after its last change (``updated_at``) when the server
            deletes it, unless a run is in flight (None: never).
        ttl_strategy: What the server does then: ``delete`` the thread, or
            ``keep_latest`` (drop its history, keep its latest state).
        compacted_at: The ``updated_at`` it had when the server last kept only
            its latest state (a thread unchanged since is not compacted again).
    """

    thread_id: str
    metadata: dict[str, object] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    graph_id: str | None = None
    error: bool = False
    temporary: bool = False
    runs: list[RunRecord] = field(default_factory=list)
    forgotten: dict[str, ForgottenRun] = field(default_factory=dict)
    ttl: float | None = None
    ttl_strategy: TTLStrategy = "delete"
    compacted_at: float | None = None
    watchers: list[MemoryObjectSendStream[RunRecord | StateUpdated]] = field(default_factory=list)

    @property
    def name(self) -> str:
        """Its id as clients know it (see :func:`public_id`)."""
        return public_id(self.thread_id)

    def tell(self, news: RunRecord | StateUpdated) -> None:
        """Tell the thread's joins of a run started or a state update.

        A join whose queue is full (its client does not read) is let go: its
        stream ends, and the others go on.
        """
        for watcher in list(self.watchers):
            try:
                watcher.send_nowait(news)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.watchers.remove(watcher)
                watcher.close()

    def close_watchers(self) -> None:
        """The thread is gone: its joins' streams end (once their runs have)."""
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            watcher.close()

    @property
    def inflight(self) -> list[RunRecord]:
        """Runs of this thread not finished yet, oldest first."""
        return [r for r in self.runs if not r.done.is_set()]

    @property
    def idle(self) -> bool:
        """Whether every run of this thread has ended (or it has none)."""
        return all(r.ended for r in self.runs)

    def status(self, saved: ThreadValues) -> ThreadStatus:
        """Busy, interrupted (``saved`` waits for decisions), error or idle."""
        if self.inflight:
            return "busy"
        if saved.interrupts or saved.stopped:
            return "interrupted"
        return "error" if self.error else "idle"

    @property
    def expires_at(self) -> float | None:
        """When the server deletes it if nothing changes it first (None: never)."""
        return None if self.ttl is None else self.updated_at + self.ttl

    def ttl_json(self) -> TTLJSON | None:
        """Its time to live as ``GET /threads/{id}?include=ttl`` answers it."""
        expires = self.expires_at
        if self.ttl is None or expires is None:
            return None
        return {"strategy": self.ttl_strategy, "ttl": self.ttl / 60, "expires_at": iso(expires)}

    def to_json(self, saved: ThreadValues) -> ThreadJSON:
        """The protocol's ``Thread``, with its saved state ``saved``."""
        return {
            "thread_id": self.name,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "state_updated_at": iso(self.updated_at),
            "metadata": self.metadata,
            "status": self.status(saved),
            "config": {},
            "values": saved.values,
            "interrupts": {"tools": saved.interrupts} if saved.interrupts else {},
        }


@dataclass(frozen=True, slots=True, eq=False)
class Subscriber:
    """A listener of a run's events: its stream, and whether it wants subagents' events.

    A listener that streams only the root agent is not woken for the events of
    subagents (most of a fan-out's events).
    """

    stream: MemoryObjectSendStream[Event | bytes]
    subgraphs: bool = True

    def wants(self, event: Event) -> bool:
        return self.subgraphs or "/" not in event.path


ThreadStreamMode = Literal["run_modes", "lifecycle", "state_update"]
"""What a join of a thread's stream follows (see ``server/_thread_stream.py``)."""


@dataclass(frozen=True, slots=True)
class StateUpdated:
    """A thread's state was updated (``POST /threads/{id}/state``): its new state,
    as ``GET /threads/{id}/state`` answers it."""

    state: StateJSON


@dataclass(slots=True, kw_only=True, eq=False, weakref_slot=True)
class RunRecord:
    """One run: its protocol fields, its handle, and who listens to its events.

    Attributes:
        kwargs_of: What the run was created with (stream modes, input...), as
            JSON, or a function that makes it when first asked (:attr:`kwargs`):
            a streamed run's first event goes out before that is needed.
        seq_before: The thread's last checkpoint seq when the run was created
            on an idle thread (None otherwise): the rollback point.
        subscribers: Streams of listeners that receive the run's raw events.
        result: The run's final values as JSON, once done (or its error).
        remote: Driven by another server process (shared through the relay);
            this record follows it.
        webhook: The URL POSTed the run's outcome when it ends, if any.
        client: Who the run counts against for the cap on runs in flight
            (``_run_slots``), until its record is final; None: not counted.
    """

    run_id: str
    thread: ThreadRecord
    assistant: AssistantRecord
    kwargs_of: dict[str, object] | Callable[[], dict[str, object]]
    metadata: dict[str, object]
    multitask_strategy: str
    status: RunStatus = "pending"
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    seq_before: int | None = None
    handle: RunHandle | None = None
    cancel_requested: str | None = None  # "interrupt" or "rollback"
    subscribers: list[Subscriber] = field(default_factory=list)
    result: JSONObject | None = None
    finished_at: float | None = None
    remote: bool = False
    webhook: str | None = None
    client: Hashable | None = field(default=None, repr=False)
    _done: anyio.Event | None = field(default=None, repr=False)
    _cancelled: anyio.Event | None = field(default=None, repr=False)

    # The two events are made when first used: most runs' are after their
    # first event is out (a burst of 1,000 requests waits for each one made).

    @property
    def done(self) -> anyio.Event:
        """Set when the run has ended and its record is final."""
        if self._done is None:
            self._done = anyio.Event()
        return self._done

    @property
    def ended(self) -> bool:
        """Whether :attr:`done` is set (without making the event)."""
        return self._done is not None and self._done.is_set()

    @property
    def cancelled(self) -> anyio.Event:
        """Set when the run is asked to stop (a cancel, a client that left)."""
        if self._cancelled is None:
            self._cancelled = anyio.Event()
        return self._cancelled

    @property
    def kwargs(self) -> dict[str, object]:
        """What the run was created with (stream modes, input...), echoed."""
        kwargs = self.kwargs_of
        if callable(kwargs):
            kwargs = self.kwargs_of = kwargs()
        return kwargs

    def to_json(self) -> RunJSON:
        """The protocol's ``Run``."""
        return {
            "run_id": self.run_id,
            "thread_id": self.thread.name,
            "assistant_id": self.assistant.assistant_id,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "status": self.status,
            "metadata": self.metadata,
            "multitask_strategy": self.multitask_strategy,
            "kwargs": self.kwargs,
        }


FORGOTTEN_PER_THREAD = 1000
"""Forgotten runs a thread remembers (the oldest go first): ~300 bytes each."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgottenRun:
    """What the server keeps of a run of a saved thread once it has let go of it.

    The protocol fields of the run, without what it was created with (its
    input) or its values: those of its thread are read from the thread's
    checkpoint. A run that failed keeps its error (small).

    Attributes:
        error: The run's error as JSON (``__error__``), if it failed.
    """

    run_id: str
    thread_id: str
    assistant_id: str
    status: RunStatus
    created_at: float
    updated_at: float
    metadata: dict[str, object]
    multitask_strategy: str
    error: JSONObject | None = None

    @classmethod
    def of(cls, run: RunRecord) -> ForgottenRun:
        """What is kept of a finished run."""
        error = run.result.get("__error__") if run.result is not None else None
        return cls(
            run_id=run.run_id,
            thread_id=run.thread.thread_id,
            assistant_id=run.assistant.assistant_id,
            status=run.status,
            created_at=run.created_at,
            updated_at=run.updated_at,
            metadata=run.metadata,
            multitask_strategy=run.multitask_strategy,
            error=None if error is None else {"__error__": error},
        )

    @property
    def name(self) -> str:
        """Its thread's id as clients know it."""
        return public_id(self.thread_id)

    def to_json(self) -> RunJSON:
        """The protocol's ``Run`` (its ``kwargs`` are no longer known: empty)."""
        return {
            "run_id": self.run_id,
            "thread_id": self.name,
            "assistant_id": self.assistant_id,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "status": self.status,
            "metadata": self.metadata,
            "multitask_strategy": self.multitask_strategy,
            "kwargs": {},
        }


def public_id(key: str) -> str:
    """A thread's id as clients know it, from its key (``ThreadRecord.thread_id``).

    The same, but for the thread of an owner who was not the first to use its
    id, whose key is ``<owner>/<id>`` (see ``_thread_lookup``): an id has no ``/``.
    """
    return key.rpartition("/")[2]


def matches(metadata: Mapping[str, object], wanted: Mapping[str, object] | None) -> bool:
    """Whether every key of ``wanted`` has that value in ``metadata``."""
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())

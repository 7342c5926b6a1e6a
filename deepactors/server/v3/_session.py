"""A thread's v3 session: the events of its runs, numbered, kept for replay.

One :class:`ThreadSession` per thread with a client (made by the first
``run.start`` or event stream, see :class:`Sessions`). It follows the
thread's runs the way a join of the thread's stream does (a watcher on the
:class:`~deepactors.server._records.ThreadRecord`; a run started by
``run.start`` is subscribed to before it is launched, so none of its events
is missed), renders each run's events (:mod:`._render`), gives every event the
session's next ``seq``, keeps the last :data:`SESSION_EVENTS` of them for
``since`` replay, and hands each to the event streams whose filter it
matches.

A session ends with its thread (deleted: its watchers closed), or
:data:`SESSION_LINGER` seconds after no event stream is open and no run of it
is in flight: what it kept goes with it, and a later stream starts from the
next run.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict, final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from ...events import (
    Event,
    Interrupted,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    SubagentSpawned,
)
from ...langchain.views import namespace_of
from .._records import RunRecord, StateUpdated, Subscriber, ThreadRecord
from .._runs import RunManager
from ._render import Out, RunRenderer

__all__ = [
    "SESSION_EVENTS",
    "SESSION_LINGER",
    "STREAM_QUEUE",
    "EventFilter",
    "Sessions",
    "ThreadSession",
]

SESSION_EVENTS = 10_000
"""Events a thread's session keeps for ``since`` replay (older ones are gone:
a ``since`` before them is refused)."""

SESSION_LINGER = 60.0
"""Seconds a session outlives its last event stream and run (then it ends, and
what it kept goes with it)."""

STREAM_QUEUE = 10_000
"""Events an event stream may have queued for its client at most: past it the
client is not reading, and its stream ends (the session goes on)."""

CHANNELS = frozenset(
    {
        "values",
        "updates",
        "messages",
        "tools",
        "lifecycle",
        "input",
        "checkpoints",
        "tasks",
        "custom",
    }
)
"""The channels a subscription may name (and ``custom:<name>``)."""


@final
class EventParams(TypedDict):
    """A v3 event's ``params``: the agent it is of, when, and what it says."""

    namespace: list[str]
    timestamp: int
    data: object
    node: NotRequired[str]


class SessionEvent(TypedDict):
    """A v3 event as its session numbers, keeps and sends it."""

    type: Literal["event"]
    event_id: str
    seq: int
    method: str
    params: EventParams


class TreeNode(TypedDict):
    """An agent of ``agent.getTree``, its subagents (as seen) below it."""

    namespace: list[str]
    status: str
    graph_name: str
    children: list[TreeNode]


@dataclass(frozen=True, slots=True)
class EventFilter:
    """What an event stream wants: ``channels``, under ``namespaces`` (prefixes),
    at most ``depth`` below them."""

    channels: frozenset[str]
    namespaces: tuple[tuple[str, ...], ...] | None = None
    depth: int | None = None

    def matches(self, event: SessionEvent) -> bool:
        """Whether ``event`` passes the filter (the protocol's rules)."""
        method = event["method"]
        channel = "input" if method == "input.requested" else method
        if channel == "custom":
            data = event["params"]["data"]
            name = data.get("name") if isinstance(data, Mapping) else None
            if "custom" not in self.channels and f"custom:{name}" not in self.channels:
                return False
        elif channel not in self.channels:
            return False
        if not self.namespaces:
            return True
        ns = tuple(event["params"]["namespace"])
        return any(
            ns[: len(prefix)] == prefix
            and (self.depth is None or len(ns) - len(prefix) <= self.depth)
            for prefix in self.namespaces
        )


@final
class Listener:
    """One open event stream: its filter and its bounded queue."""

    def __init__(self, wanted: EventFilter) -> None:
        self.wanted = wanted
        self.send, self.receive = anyio.create_memory_object_stream[SessionEvent](STREAM_QUEUE)
        self.too_slow = False

    def offer(self, event: SessionEvent) -> None:
        if self.too_slow or not self.wanted.matches(event):
            return
        try:
            self.send.send_nowait(event)
        except anyio.WouldBlock:
            self.too_slow = True  # STREAM_QUEUE events unread: this stream ends
            self.send.close()
        except anyio.ClosedResourceError:
            pass


@final
class ThreadSession:
    """A thread's session (see the module docstring)."""

    def __init__(
        self, manager: RunManager, thread: ThreadRecord, on_end: Callable[[], None]
    ) -> None:
        self.thread = thread
        self._manager = manager
        self._on_end = on_end
        self._id = uuid.uuid4().hex[:12]  # event ids stay unique across sessions
        self._seq = 0
        self._kept: deque[SessionEvent] = deque(maxlen=SESSION_EVENTS)
        self._listeners: list[Listener] = []
        self._followed: set[str] = set()
        self._running = 0
        self._ended = False
        self._lingering = False
        self._news, watched = anyio.create_memory_object_stream[RunRecord | StateUpdated](math.inf)
        thread.watchers.append(self._news)
        manager.start_soon(self._dispatch, watched)
        self.subagents: dict[tuple[str, ...], str] = {}  # namespace -> status

    @property
    def seq(self) -> int:
        """The seq of the last event (0: none yet)."""
        return self._seq

    @property
    def ended(self) -> bool:
        """Whether the session ended (a new one serves the thread from now)."""
        return self._ended

    def start(self, run: RunRecord) -> None:
        """Follow a run created (not launched) for ``run.start``, from its first event."""
        send, receive = anyio.create_memory_object_stream[Event | bytes](math.inf)
        run.subscribers.append(Subscriber(send, subgraphs=True))
        self._follow_soon(run, receive)

    def listen(self, wanted: EventFilter, since: int | None) -> Listener:
        """An event stream: the kept events after ``since`` that match, then the new ones.

        Raises:
            ValueError: ``since`` is before the oldest event kept.
        """
        oldest = self._kept[0]["seq"] if self._kept else self._seq + 1
        if since is not None and since + 1 < oldest:
            raise ValueError(
                f"since: {since} is before the oldest event this session keeps ({oldest}; it "
                f"keeps the last {SESSION_EVENTS:,}); read the state with state.get instead"
            )
        listener = Listener(wanted)
        for event in self._kept:
            if since is None or event["seq"] > since:
                listener.offer(event)
        self._listeners.append(listener)
        return listener

    def leave(self, listener: Listener) -> None:
        """An event stream ended."""
        if listener in self._listeners:
            self._listeners.remove(listener)
        listener.send.close()
        self._end_if_idle()

    def tree(self) -> TreeNode:
        """``agent.getTree``: the root agent, its subagents (as seen) below."""
        root: TreeNode = {
            "namespace": [],
            "status": "running" if self._running else "completed",
            "graph_name": self.thread.graph_id or "agent",
            "children": [],
        }
        nodes: dict[tuple[str, ...], TreeNode] = {(): root}
        for ns, status in sorted(self.subagents.items(), key=lambda item: len(item[0])):
            node: TreeNode = {
                "namespace": list(ns),
                "status": status,
                "graph_name": _graph(ns[-1]),
                "children": [],
            }
            nodes[ns] = node
            nodes.get(ns[:-1], root)["children"].append(node)
        return root

    # -- following runs ------------------------------------------------------------

    def _follow_soon(
        self, run: RunRecord, events: MemoryObjectReceiveStream[Event | bytes]
    ) -> None:
        self._followed.add(run.run_id)
        self._running += 1
        self._manager.start_soon(self._follow, run, events)

    async def _dispatch(self, watched: MemoryObjectReceiveStream[RunRecord | StateUpdated]) -> None:
        """Runs made on the thread by other means (``runs.create``...): followed from now."""
        try:
            async with watched:
                async for item in watched:
                    if isinstance(item, RunRecord) and item.run_id not in self._followed:
                        events = await self._manager.subscribe(item, modes="values", subgraphs=True)
                        self._follow_soon(item, events)
        finally:
            self._end()  # the thread was deleted, or the server is shutting down

    async def _follow(
        self, run: RunRecord, events: MemoryObjectReceiveStream[Event | bytes]
    ) -> None:
        renderer = RunRenderer(self.thread.name)
        graph = run.assistant.graph_id
        self._emit(Out("lifecycle", [], {"event": "running", "graph_name": graph}))
        interrupted = False
        try:
            async with events:
                async for event in events:
                    if isinstance(event, bytes):  # another process's frames: never here
                        continue
                    if isinstance(event, Interrupted) and "/" not in event.path:
                        interrupted = True
                    self._watch_subagents(event)
                    for out in renderer.feed(event):
                        self._emit(out)
            await run.done.wait()
            self._emit(Out("lifecycle", [], _terminal(run, interrupted, graph)))
        finally:
            self._running -= 1
            self._end_if_idle()

    def _watch_subagents(self, event: Event) -> None:
        """Subagents as they start and end: their lifecycle events, and the tree."""
        if isinstance(event, SubagentSpawned):
            ns = tuple(namespace_of(event.child))
            self.subagents[ns] = "running"
            data: dict[str, object] = {"event": "started", "graph_name": event.subagent_type}
            if event.call_id:
                data["cause"] = {"type": "toolCall", "tool_call_id": event.call_id}
            self._emit(Out("lifecycle", list(ns), data))
            return
        if not isinstance(
            event, SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted
        ):
            return
        status = _SUBAGENT_END[type(event)]
        ns = tuple(namespace_of(event.child))
        if ns not in self.subagents:
            return
        self.subagents[ns] = status
        end: dict[str, object] = {"event": status, "graph_name": _graph(ns[-1])}
        if isinstance(event, SubagentFailed):
            end["error"] = event.error
        self._emit(Out("lifecycle", list(ns), end))

    def _emit(self, out: Out) -> None:
        self._seq += 1
        params: EventParams = {
            "namespace": out.namespace,
            "timestamp": int(time.time() * 1000),
            "data": out.data,
        }
        if out.node is not None:
            params["node"] = out.node
        event: SessionEvent = {
            "type": "event",
            "event_id": f"{self._id}-{self._seq}",
            "seq": self._seq,
            "method": out.method,
            "params": params,
        }
        self._kept.append(event)
        for listener in self._listeners:
            listener.offer(event)

    # -- ending ----------------------------------------------------------------------

    @property
    def _idle(self) -> bool:
        return not self._listeners and not self._running

    def _end_if_idle(self) -> None:
        """End the session :data:`SESSION_LINGER` seconds after it fell idle, if it
        still is then (a client's next stream, opened just after a run ended,
        still finds the run's events)."""
        if self._idle and not self._ended and not self._lingering:
            self._lingering = True
            self._manager.start_soon(self._linger)

    async def _linger(self) -> None:
        await anyio.sleep(SESSION_LINGER)
        self._lingering = False
        if self._idle:
            self._end()
        else:
            self._end_if_idle()  # (busy again: checked again when it is idle)

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self._news in self.thread.watchers:
            self.thread.watchers.remove(self._news)
        self._news.close()
        for listener in self._listeners:
            listener.send.close()
        self._listeners.clear()
        self._on_end()


_SUBAGENT_END: dict[type[Event], str] = {
    SubagentFinished: "completed",
    SubagentFailed: "failed",
    SubagentCancelled: "failed",
    SubagentInterrupted: "interrupted",
}


def _graph(segment: str) -> str:
    """A subagent's name from its namespace segment (``task-2:researcher``)."""
    return segment.partition(":")[2] or segment


def _terminal(run: RunRecord, interrupted: bool, graph: str) -> dict[str, object]:
    """The run's last lifecycle event: ``completed``, ``interrupted`` (stopped for
    a human), or ``failed`` (an error, a timeout, a cancel) with why."""
    if run.status == "success":
        return {"event": "interrupted" if interrupted else "completed", "graph_name": graph}
    error = (run.result or {}).get("__error__") or {}
    message = error.get("message") if isinstance(error, dict) else None
    if run.status == "interrupted":
        message = message or "the run was cancelled"
    elif run.status == "timeout":
        message = message or "the run passed its deadline"
    return {"event": "failed", "graph_name": graph, "error": message or "the run failed"}


@final
class Sessions:
    """The app's thread sessions, one per thread key, made when first needed."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self._by_thread: dict[str, ThreadSession] = {}

    def of(self, thread: ThreadRecord) -> ThreadSession:
        """The thread's session (a new one if it has none, or its last one ended)."""
        key = thread.thread_id
        session = self._by_thread.get(key)
        if session is None or session.ended:
            session = ThreadSession(self.manager, thread, lambda: self._gone(key, session))
            self._by_thread[key] = session
        return session

    def find(self, thread: ThreadRecord) -> ThreadSession | None:
        """The thread's session in progress, if it has one."""
        session = self._by_thread.get(thread.thread_id)
        return None if session is None or session.ended else session

    def _gone(self, key: str, session: ThreadSession | None) -> None:
        if self._by_thread.get(key) is session:
            del self._by_thread[key]

    def __iter__(self) -> Iterator[ThreadSession]:
        return iter(list(self._by_thread.values()))

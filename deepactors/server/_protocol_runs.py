"""Runs started by the other protocols' endpoints (AG-UI, the AI SDK's stream, A2A).

Those protocols name a conversation by an id of the client's (AG-UI's
``threadId``, the AI SDK's chat ``id``, A2A's ``contextId``) and send either
the whole conversation or its next message. Here that id is a thread of the
server like any other: found or created for the caller (another user's thread
is a 404, as on every endpoint), and the run is created through the run
manager, so it goes through the thread's handle, takes its turn in the
thread's mailbox, counts among the thread's runs (``GET /threads/{id}/runs``)
and is cancelled as any other (a client that leaves cancels it). The
protocol's own shape is the endpoint's business: this module hands it the
run's raw events and, once the run has ended, how it ended.

:class:`ProtocolStream` is the response those endpoints stream: frames a
:class:`Translator` renders from the events, a heartbeat while nothing
happens, and the client watched for leaving while it waits.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._core.pacing import Pacer
from ..events import Event
from ..limits import Limits
from ..messages import Message
from ._authz import owned
from ._guard import Guard
from ._records import RunRecord, Subscriber, ThreadRecord
from ._responses import _watched
from ._runs import RunManager
from ._schemas import RunCreate
from ._wire_json import RunStatus

__all__ = [
    "Outcome",
    "ProtocolStream",
    "StartedRun",
    "SubagentFilter",
    "Translator",
    "manager_of",
    "outcome_of",
    "rewind_before",
    "run_stream",
    "saved_messages",
    "start_run",
    "take_stream",
    "thread_for",
]


def manager_of(request: Request) -> RunManager:
    """The app's run manager (503 while the app is not serving)."""
    manager: RunManager | None = getattr(request.app.state, "runs", None)
    if manager is None:
        raise HTTPException(503, "the server is starting or shutting down")
    return manager


def take_stream(request: Request) -> Callable[[], None]:
    """Count the request against its client's open streams (429 past the cap).

    Returns:
        What releases it, once the response has ended.
    """
    guard: Guard | None = getattr(request.app, "guard", None)
    if guard is None:  # an app that has no guard of ours (never create_app's)
        return lambda: None
    return guard.take_stream(request.scope)


async def thread_for(manager: RunManager, thread_id: str) -> ThreadRecord:
    """The caller's thread ``thread_id``, made for the caller if there is none.

    Ids are each owner's (see ``_thread_lookup``): another user's thread of this
    id is not the caller's, who gets one of their own beside it, never a record
    made under the other's key (which would run on the other's checkpoints).

    Raises:
        HTTPException: 422, a bad id.
    """
    if not isinstance(thread_id, str) or not thread_id or len(thread_id) > 256:
        raise HTTPException(422, f"thread id: 1 to 256 characters, not {thread_id!r}")
    await manager.lookup.claim_thread(thread_id, owned({}))
    return await manager.lookup.thread(thread_id, "update")


async def saved_messages(manager: RunManager, thread: ThreadRecord) -> list[Message]:
    """The messages the thread holds now (its root actor's), oldest first."""
    state = await manager.handle(thread).state()
    if state.seq is None:
        return []
    return list(state.values.get("messages", ()))


async def rewind_before(manager: RunManager, thread: ThreadRecord, message_id: object) -> bool:
    """Take the thread back to just before the record that added message
    ``message_id`` (a chat's "regenerate": that message is sent again).

    An order in the thread's mailbox, in turn with its runs; the records after
    stay in the log, as a fork's do.

    Returns:
        Whether the thread held that message (else nothing was done).
    """
    if not isinstance(message_id, str):
        return False
    handle = manager.handle(thread)
    root = manager.lookup.thread_assistant(thread).agent.name
    for record in await handle.history(path=root):
        data = record.data
        messages = data.get("messages") if isinstance(data, Mapping) else None
        if isinstance(messages, list) and any(
            isinstance(m, Mapping) and m.get("id") == message_id for m in messages
        ):
            await handle.rollback(record.seq - 1)
            await manager.refresh(thread)
            return True
    return False


@dataclass(frozen=True, slots=True)
class StartedRun:
    """A run created for a protocol's request, not launched yet.

    Attributes:
        run: Its record (``run_id``, status, result once it ended).
        events: Its raw events, every actor's, until it ends.
    """

    run: RunRecord
    events: MemoryObjectReceiveStream[Event | bytes]


async def start_run(
    manager: RunManager,
    thread: ThreadRecord,
    *,
    assistant_id: str,
    messages: Sequence[Mapping[str, object]] = (),
    resume: object = None,
    metadata: Mapping[str, object] | None = None,
    timeout: float | None = None,
) -> StartedRun:
    """Create a run on ``thread``: its new ``messages``, or ``resume`` decisions.

    The run waits behind the thread's runs in progress (``enqueue``), as a
    message sent while the agent still works would. It is created but not
    started: the response launches it once its first frames are out. With
    ``timeout``, it ends (``timeout``) that many seconds from now.

    Raises:
        HTTPException: 404 an unknown assistant, 422 bad input (nothing started).
    """
    body: dict[str, object] = {"assistant_id": assistant_id, "metadata": dict(metadata or {})}
    if timeout is not None:  # as a remote parent sends its deadline (deepactors.limits)
        body["config"] = {"configurable": Limits(timeout=timeout).configurable()}
    if resume is not None:
        body["command"] = {"resume": resume}
    else:
        body["input"] = {"messages": list(messages)}
    send, receive = anyio.create_memory_object_stream[Event | bytes](math.inf)
    try:
        run = await manager.create(
            thread,
            RunCreate.model_validate(body),
            subscriber=Subscriber(send, subgraphs=True),
            launch=False,
        )
    except BaseException:
        send.close()
        receive.close()
        raise
    return StartedRun(run, receive)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How a run ended, as a protocol reports it.

    Attributes:
        status: ``success`` (finished, or stopped for decisions: the events
            said which), ``interrupted`` (cancelled), ``error`` or ``timeout``.
        error: What went wrong (``error`` and ``message``), when it failed.
    """

    status: RunStatus
    error: Mapping[str, str] | None = None


async def outcome_of(run: RunRecord) -> Outcome:
    """Wait for the run to end; how it did."""
    await run.done.wait()
    given = (run.result or {}).get("__error__")
    error = {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else None
    if run.status == "timeout" and error is None:
        error = {"error": "TimeoutError", "message": "the run passed its deadline"}
    return Outcome(status=run.status, error=error)


class Translator(Protocol):
    """Renders a run's events as one protocol's frames (bytes, ready to send)."""

    def opening(self) -> bytes:
        """What goes out first, before the run starts."""
        ...

    def feed(self, event: Event) -> bytes:
        """The frames for one event (empty: none)."""
        ...

    def closing(self, outcome: Outcome) -> bytes:
        """The last frames, once the run has ended."""
        ...


HEARTBEAT = 15.0
"""Seconds of silence before a heartbeat keeps proxies from closing a stream."""


class ProtocolStream(Response):
    """A protocol's stream of one run: its translator's frames, as they come.

    Args:
        events: The run's raw events, closed when it ends.
        translator: Renders the frames.
        launch: Starts the run (idempotent), once the opening frames are out;
            called again, in any case, when the response ends.
        leave: Called once if the client leaves before the end (cancels the run).
        outcome: Awaited after the last event: how the run ended.
        pacer: The runtime's pacer: under a burst, the run's start waits its
            turn, so the other requests' first frames go out first.
        media_type: The response's content type.
        headers: More response headers.
        heartbeat: Sent after :data:`HEARTBEAT` seconds of silence (an SSE comment).
        release: Called once when the response ends (the client's stream slot).
    """

    def __init__(
        self,
        events: MemoryObjectReceiveStream[Event | bytes],
        translator: Translator,
        *,
        launch: Callable[[], None],
        leave: Callable[[], None],
        outcome: Callable[[], Awaitable[Outcome]],
        pacer: Pacer | None = None,
        media_type: str = "text/event-stream; charset=utf-8",
        headers: Mapping[str, str] | None = None,
        heartbeat: bytes = b": heartbeat\n\n",
        release: Callable[[], None] = lambda: None,
    ) -> None:
        self._events = events
        self._translator = translator
        self._launch = launch
        self._leave = leave
        self._outcome = outcome
        self._pacer = pacer
        self._media_type = media_type
        self._extra = dict(headers or {})
        self._heartbeat = heartbeat
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", self._media_type.encode()),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),
            *((k.lower().encode(), v.encode()) for k, v in self._extra.items()),
        ]
        try:
            try:
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                opening = self._translator.opening()
                await send({"type": "http.response.body", "body": opening, "more_body": True})
            except OSError:
                self._leave()  # the client is gone already
                return
            pacer = self._pacer
            if pacer is not None and pacer.due():
                await pacer.wait()  # under a burst, others' first frames go out first
            self._launch()
            await _watched(self._respond(send), receive, self._leave)
        finally:
            self._launch()  # never left created and not started
            self._events.close()
            self._release()

    def _respond(self, send: Send) -> Callable[[], Awaitable[None]]:
        async def respond() -> None:
            await self._send_events(send)

        return respond

    async def _send_events(self, send: Send) -> None:
        events = self._events
        feed = self._translator.feed
        async with events:
            ended = False
            chunks: list[bytes] = []
            while not ended:
                # Everything queued already goes out in one write (see
                # _responses.EventSourceResponse: one trip per batch, not per event).
                while True:
                    try:
                        item = events.receive_nowait()
                    except anyio.WouldBlock:
                        break
                    except anyio.EndOfStream:
                        ended = True
                        break
                    if isinstance(item, Event):  # (bytes: a run of another process)
                        chunks.append(feed(item))
                body = b"".join(chunks)
                chunks.clear()
                if body:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                if ended:
                    break
                with anyio.move_on_after(HEARTBEAT):
                    try:
                        item = await events.receive()
                    except anyio.EndOfStream:
                        break
                    if isinstance(item, Event):
                        chunks.append(feed(item))
                    continue
                chunks.append(self._heartbeat)
        tail = self._translator.closing(await self._outcome())
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def run_stream(
    manager: RunManager,
    started: StartedRun,
    translator: Translator,
    *,
    release: Callable[[], None],
    media_type: str = "text/event-stream; charset=utf-8",
    headers: Mapping[str, str] | None = None,
) -> ProtocolStream:
    """The :class:`ProtocolStream` of a run the manager created (:func:`start_run`)."""
    run = started.run
    return ProtocolStream(
        started.events,
        translator,
        launch=lambda: manager.launch(run),
        leave=lambda: manager.cancel_soon(run),
        outcome=lambda: outcome_of(run),
        pacer=manager.runtime.pacer,
        media_type=media_type,
        headers=headers,
        release=release,
    )


@dataclass(frozen=True, slots=True)
class SubagentFilter:
    """Which subagents' own events a client does not want (their lifecycle still goes out).

    Attributes:
        hide: True: every subagent's; else the subagent types (``researcher``)
            whose events, and their own subagents', are left out.
    """

    hide: bool | frozenset[str] = False

    @classmethod
    def parse(cls, value: object, *, field: str) -> SubagentFilter:
        """From a request's switch: a bool, or a list of subagent types.

        Raises:
            HTTPException: 422, neither.
        """
        if value is None:
            return cls()
        if isinstance(value, bool):
            return cls(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return cls(frozenset(value))
        raise HTTPException(422, f"{field}: true, false or a list of subagent types, not {value!r}")

    def hides(self, path: str) -> bool:
        """Whether the events of the actor at ``path`` are left out."""
        hide = self.hide
        if hide is False or "/" not in path:
            return False
        if hide is True:
            return True
        # "main/task-1:researcher/task-3:reader": each level's type after its ':'.
        return any(part.partition(":")[2] in hide for part in path.split("/")[1:])

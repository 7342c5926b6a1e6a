""":class:`RemoteAgent`: a subagent that runs as a run on another Agent Protocol server.

A ``task`` call to a remote subagent (or a background task) is one thread on
the remote server, made for it, and one run of ``graph_id`` on it: the task's
description as the user's message and the parent's files as the run's
``files``. The run is followed to its end over its event stream (its events
relayed into the parent's), or, when nobody listens to the parent, waited for
(``.../runs/wait``); its final state gives the answer and the file changes, which come back as a
:class:`~deepactors.filediff.FileDiff` and merge into the parent's files
exactly as a local child's do.

Cancelling the awaiting task (the parent's deadline, its cancellation, the
subagent's ``timeout``) cancels the remote run with ``POST
.../runs/{run_id}/cancel``, shielded and bounded by ``cancel_timeout``; the
stream is opened with ``on_disconnect="cancel"`` too, so a parent process that
dies leaves no run going. A message put in the child's inbox (a background
task's ``update_async_task``) becomes a new run on the same thread with
``multitask_strategy="interrupt"``, which the child follows in turn, as
deepagents' ``update_async_task`` does.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from .._core.perloop import PerLoop
from ..actors import ChildOutcome
from ..budget import Budget
from ..context import Inbox, RunContext
from ..errors import ConfigurationError
from ..events import CustomEvent
from ..filediff import FileDiff, FileRecord
from ..messages import Usage
from ..tracing import outgoing_headers
from ._events import EventRelay
from ._limits import charge, limits_config, remaining_budget
from ._outcome import answer_of, file_changes, interrupt_note, spent_of
from ._wire import Connection, RemoteFailure, Server, open_server, stream_run, wait_run

__all__ = [
    "DEFAULT_CANCEL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "REMOTE_RUN",
    "RemoteAgent",
]

logger = logging.getLogger(__name__)

REMOTE_RUN = "remote_run"
"""The key of the :class:`~deepactors.events.CustomEvent` a remote child emits, under
its own path, as each of its runs starts: ``{"remote_run": {"url", "thread_id",
"run_id"}}`` (only when someone listens to the parent's events)."""

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds to open a connection to the remote server (and to send a request)."""

DEFAULT_READ_TIMEOUT = 60.0
"""Seconds the remote server may stay silent: deepactors and LangGraph servers
send a heartbeat on an open stream every 15 s or less, so a silence this long
is a server that hangs."""

DEADLINE_GRACE = 1.0
"""Seconds a child's run is given on the server past its deadline here. The
parent's own cancel, at the deadline, comes first and says why (a timeout, a
cancelled parent); the server's ends the runs of a parent that is gone."""

DEFAULT_CANCEL_TIMEOUT = 5.0
"""Seconds a cancelled child spends telling the server to cancel its run."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RemoteAgent:
    """A subagent served by another Agent Protocol server (deepactors or LangGraph).

    Give it to ``task`` as a :class:`~deepactors.middleware.SubAgentSpec`'s
    ``agent``, or as a subagent dict ``{"name", "description", "graph_id",
    "url"}`` to ``create_deep_agent``. It implements
    :class:`~deepactors.actors.ChildRunner`.

    Attributes:
        name: The subagent's name (its ``subagent_type``).
        graph_id: The assistant or graph the remote server runs (``assistant_id``).
        url: The server's base URL, ``http://host:port``.
        headers: Sent with every request (an ``x-api-key``, an
            ``Authorization``).
        connect_timeout: Seconds to connect and to send a request.
        read_timeout: Seconds the server may stay silent (None: for ever).
        cancel_timeout: Seconds a cancelled child may spend cancelling its run.

    Raises:
        ConfigurationError: An empty name or graph_id, or a URL that is not
            ``http(s)://host[:port][/path]``.
    """

    name: str
    graph_id: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float | None = DEFAULT_READ_TIMEOUT
    cancel_timeout: float = DEFAULT_CANCEL_TIMEOUT
    _servers: PerLoop[Server] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for key in ("name", "graph_id"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"RemoteAgent {key} must be a non-empty string")
        try:
            parsed = httpx.URL(self.url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ConfigurationError(
                f"RemoteAgent {self.name!r}: url {self.url!r}: {exc}"
            ) from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigurationError(
                f"RemoteAgent {self.name!r}: url must be http(s)://host[:port], not {self.url!r}"
            )
        for key in ("connect_timeout", "cancel_timeout", "read_timeout"):
            value = getattr(self, key)
            if (value is not None or key != "read_timeout") and not (
                isinstance(value, int | float) and value > 0
            ):
                raise ConfigurationError(
                    f"RemoteAgent {key} must be seconds above 0, not {value!r}"
                )
        object.__setattr__(self, "_servers", PerLoop(self._open, _close))

    async def _open(self) -> Server:
        # Making its SSL context loads CA certificates: blocking, so in a thread.
        make = functools.partial(
            open_server,
            self.url.rstrip("/"),
            self.headers,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
        )
        return await anyio.to_thread.run_sync(make)

    async def aclose(self) -> None:
        """Close this event loop's HTTP clients now (else they are closed as the loop ends)."""
        await self._servers.aclose()

    def run_child(
        self,
        *,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        timeout: float | None,
        budget: Budget | None = None,
        inbox: Inbox | None = None,
    ) -> Awaitable[ChildOutcome]:
        """Run the child on the remote server and reply (see ``ChildRunner``).

        The run is given the time left before the nearest deadline (the
        parent's, or ``timeout``) and the budget left (the parent's, within
        ``budget``); what it spent is added to the parent's usage and charged
        to its budget. A remote failure of any kind (unreachable, an error
        status, a failed run, a server that stopped mid-run) is a ``failed``
        outcome whose answer says what happened; a run that stopped to wait
        for a human decision is ``failed`` too, saying where it waits.
        """
        child = _RemoteChild(
            agent=self,
            description=description,
            path=path,
            label=label,
            parent=parent,
            files=files,
            budget=budget,
            inbox=inbox,
        )
        if timeout is None:
            return child.run()
        return _within(child, timeout)


async def _close(server: Server) -> None:
    await server.aclose()


async def _within(child: _RemoteChild, timeout: float) -> ChildOutcome:
    with anyio.move_on_after(timeout):
        return await child.run()
    return ChildOutcome(
        status="timed_out",
        answer=f"The remote subagent did not finish within its {timeout:g} s timeout; its "
        "run was cancelled and none of its file changes were kept.",
        diff=None,
        path=child.path,
    )


@dataclass(slots=True, kw_only=True, eq=False)
class _RemoteChild:
    """One remote child at work: its thread, its runs, what it was sent."""

    agent: RemoteAgent
    description: str
    path: str
    label: str
    parent: RunContext
    files: Mapping[str, FileRecord]
    budget: Budget | None
    inbox: Inbox | None
    thread_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    runs: list[str] = field(default_factory=list)
    final: Mapping[str, Any] | None = None  # the last run's values, when waited for

    async def run(self) -> ChildOutcome:
        agent = self.agent
        server = await agent._servers.get()
        conn = server.lease()
        sent = dict(self.files)  # the snapshot the diff is taken against
        try:
            try:
                await self._follow(conn, sent)
                usage, spent = await self._ended(conn)
                state = await self._state(conn)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True), anyio.move_on_after(agent.cancel_timeout):
                    await self._cancel(conn)
                raise
        except RemoteFailure as exc:
            return self._failed(str(exc))
        finally:
            server.release(conn)
        self.parent.add_usage(usage)
        charge(self.parent.budget, spent, usage)
        values = state.get("values") if isinstance(state, Mapping) else None
        if not isinstance(values, Mapping):
            return self._failed(f"{agent.url} answered the thread's state without values")
        waiting = interrupt_note(state)
        if waiting:
            return self._failed(
                f"it stopped to wait for a human decision ({waiting}) on thread "
                f"{self.thread_id} of {agent.url}, which this agent cannot give it; "
                "decide there, or serve the remote agent without interrupt_on"
            )
        answer, exhausted = answer_of(values)
        if exhausted:
            return self._failed(f"BudgetExceeded: {answer}", usage=usage)
        try:
            changes = file_changes(sent, values.get("files"))
        except ValueError as exc:
            return self._failed(f"{agent.url} sent back files that are not files: {exc}")
        return ChildOutcome(
            status="completed",
            answer=answer,
            diff=FileDiff(changes=changes, label=self.label),
            path=self.path,
            usage=usage,
        )

    def _failed(self, why: str, usage: Usage | None = None) -> ChildOutcome:
        return ChildOutcome(status="failed", answer=why, diff=None, path=self.path, usage=usage)

    async def _follow(self, conn: Connection, sent: Mapping[str, FileRecord]) -> None:
        """Run the child, and each message sent to it meanwhile, to the last run's end."""
        agent, parent, inbox = self.agent, self.parent, self.inbox
        kind = await conn.server_kind()
        listening = parent.emit is not None
        relay = EventRelay(parent.emit, self.path) if parent.emit is not None else None
        texts = [self.description, *(inbox.take() if inbox is not None else ())]
        body: dict[str, Any] = {
            "assistant_id": agent.graph_id,
            "input": _input(texts, sent),
            "on_disconnect": "cancel",
            "if_not_exists": "create",
            "metadata": {"parent_path": parent.path, "parent_run_id": parent.run_id},
        }
        if listening:  # (else the run's final values are waited for: no stream)
            body["stream_mode"] = _modes(kind, conn.server.lite)
            body["stream_subgraphs"] = kind == "deepactors"
        path = f"/threads/{self.thread_id}/runs/stream"
        while True:
            limits = limits_config(_time_left(), remaining_budget(parent.budget, self.budget))
            if limits:
                body["config"] = {"configurable": limits}
            run: list[str] = []

            def on_part(mode: str, data: Any, run: list[str] = run) -> None:
                if relay is not None:
                    relay.part(mode, data, run[0] if run else "")

            def on_run(run_id: str, run: list[str] = run) -> None:
                run.append(run_id)
                self.runs.append(run_id)
                if parent.emit is not None:
                    # Where the child's run is, for whoever follows the tree
                    # (a UI linking to it, a test reading its status).
                    where = {"url": agent.url, "thread_id": self.thread_id, "run_id": run_id}
                    parent.emit(
                        CustomEvent(path=self.path, run_id=run_id, data={REMOTE_RUN: where})
                    )

            # The run's request carries the trace context (traceparent) of the
            # `task` call that made it: the remote run continues the parent's trace.
            trace = outgoing_headers()
            if listening:
                stream = stream_run(
                    conn, path, body, on_run=on_run, on_part=on_part, extra_headers=trace
                )
            else:
                stream = self._wait(conn, body, on_run, trace)
            try:
                if inbox is None:
                    await stream
                else:
                    await _until_message(stream, inbox)
            except RemoteFailure as exc:
                if exc.status != 422 or body.get("stream_mode") != ["events-lite"] or run:
                    raise
                conn.server.lite = False  # an older deepactors server: all its events
                body["stream_mode"] = ["events"]
                continue
            if inbox is None or not inbox.pending:
                return
            # A message came while it worked (or as it finished): a new run on
            # the thread with it, interrupting the current one if it still goes.
            body = {
                **body,
                "input": _input(inbox.take(), None),
                "multitask_strategy": "interrupt",
            }

    async def _wait(
        self,
        conn: Connection,
        body: Mapping[str, Any],
        on_run: Callable[[str], None],
        trace: Mapping[str, str],
    ) -> None:
        path = f"/threads/{self.thread_id}/runs/wait"
        self.final = None  # (an earlier run's, ended by a message's run, are not the end)
        self.final = await wait_run(conn, path, body, on_run=on_run, extra_headers=trace)

    async def _state(self, conn: Connection) -> Any:
        """The thread's final state: as the last run's wait answered, or read from the server."""
        final = self.final
        if final is not None:
            interrupts = final.get("__interrupt__") or []
            values = {k: v for k, v in final.items() if k != "__interrupt__"}
            return {"values": values, "interrupts": interrupts}
        return await conn.call("GET", f"/threads/{self.thread_id}/state")

    async def _ended(self, conn: Connection) -> tuple[Usage | None, dict[str, Any]]:
        """Check that the last run succeeded; what the child's runs spent.

        A stream that closes is not proof of a run's end (a proxy, a server
        shutting down): the run's own status is. Only deepactors servers record
        usage and budget reports in a run's metadata; earlier runs (ended by a
        message's run) count too, for what they recorded.

        Raises:
            RemoteFailure: The last run did not succeed, or its status is unknown.
        """
        if not self.runs:
            raise RemoteFailure(f"{self.agent.url} streamed no run id for the child's run")
        deepactors = conn.kind == "deepactors"
        usage: Usage | None = None
        spent: dict[str, Any] = {}
        for run_id in self.runs if deepactors else self.runs[-1:]:
            run = await self._run_record(conn, run_id)
            status = run.get("status")
            if run_id == self.runs[-1] and status in ("pending", "running"):
                # Its stream closed, and yet the record says it goes on: the
                # record lags (kept by another server process, which writes
                # it a moment later), or a proxy cut the stream. Wait for its end.
                await conn.call("GET", f"/threads/{self.thread_id}/runs/{run_id}/join")
                run = await self._run_record(conn, run_id)
                status = run.get("status")
            if run_id == self.runs[-1] and status != "success":
                raise RemoteFailure(
                    f"the run {run_id} on {self.agent.url} ended with status {status!r}"
                )
            used, report = spent_of(run.get("metadata"))
            if used is not None:
                usage = used if usage is None else usage + used
            for key, value in report.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    spent[key] = spent.get(key, 0) + value
        return usage, spent

    async def _run_record(self, conn: Connection, run_id: str) -> Mapping[str, Any]:
        run = await conn.call("GET", f"/threads/{self.thread_id}/runs/{run_id}")
        if not isinstance(run, Mapping):
            raise RemoteFailure(f"{self.agent.url} answered run {run_id} with {run!r}")
        return run

    async def _cancel(self, conn: Connection) -> None:
        """Cancel the child's run on the server (it may have ended: no matter)."""
        run_ids = self.runs[-1:]
        if not run_ids:
            # Cancelled before the server said which run it made (if it made
            # one): every run of the thread still going. Closing the stream
            # cancels it too (on_disconnect), this is for a server that missed it.
            try:
                listed = await conn.call("GET", f"/threads/{self.thread_id}/runs")
            except RemoteFailure:
                return  # no thread: no run was made
            run_ids = [
                r["run_id"]
                for r in listed or ()
                if isinstance(r, Mapping) and r.get("status") in ("pending", "running")
            ]
        for run_id in run_ids:
            try:
                await conn.call("POST", f"/threads/{self.thread_id}/runs/{run_id}/cancel")
            except RemoteFailure as exc:
                logger.debug("cancelling remote run %s: %s", run_id, exc)


async def _until_message(stream: Awaitable[None], inbox: Inbox) -> None:
    """Await ``stream`` until it ends or a message arrives in ``inbox``.

    Leaving the stream closes its connection, which cancels the run
    (``on_disconnect``); the next run, with the message, interrupts it anyway.
    """
    failure: RemoteFailure | None = None

    async def follow(scope: anyio.CancelScope) -> None:
        nonlocal failure
        try:
            await stream
        except RemoteFailure as exc:
            failure = exc  # raised below, not as an exception group
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow, tg.cancel_scope)
        await inbox.wait()
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


def _time_left() -> float | None:
    """The run's timeout on the server: the time left here, and :data:`DEADLINE_GRACE`."""
    deadline = anyio.current_effective_deadline()
    if deadline == float("inf"):
        return None
    return max(0.0, deadline - anyio.current_time()) + DEADLINE_GRACE


def _modes(kind: str, lite: bool) -> list[str]:
    """What to stream to relay the child's events."""
    if kind == "deepactors":
        # Without the state updates, which the relay drops: their values are
        # the child's whole state (the parent's files with it) at every step.
        return ["events-lite"] if lite else ["events"]
    return ["updates", "custom"]


def _input(texts: list[str], files: Mapping[str, FileRecord] | None) -> dict[str, Any]:
    values: dict[str, Any] = {"messages": [{"role": "user", "content": t} for t in texts]}
    if files:
        # deepagents' FileData: what both servers take as input and give back as state.
        values["files"] = {p: r.to_file_data() for p, r in files.items()}
    return values

"""One remote child at work: its thread, its runs, what it spent, and its thread's end.

See :class:`~deepactors.remote.RemoteAgent` for what a remote child is. Here is
how one goes: its runs are followed to their end (a message in its inbox
starts the next one), what they spent is read from their records and charged
to the parent whichever way they ended, the answer and file changes are read
from the thread's final state, and then the thread is deleted on the server
(unless the agent keeps threads, or the thread waits for a human decision).
Cancelled, the child cancels its run, charges what it spent, and deletes its
thread, shielded and within ``cancel_timeout``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from .._core.jsonvalue import JSONObject, JSONValue
from ..actors import ChildOutcome
from ..budget import Budget, Refusal
from ..context import Inbox, RunContext
from ..events import BudgetExhausted, CustomEvent
from ..filediff import FileDiff, FileRecord
from ..limits import Limits
from ..messages import Usage
from ..tracing import outgoing_headers
from ._events import EventRelay
from ._limits import Spent, charge, recorded, remaining_budget
from ._meter import Meter
from ._outcome import answer_of, file_changes, interrupt_note, spent_of
from ._wire import Connection, RemoteFailure, Server, stream_run, wait_run


class _Where(Protocol):
    """What a child reads of its :class:`~deepactors.remote.RemoteAgent` (a
    protocol, so this module needs no import of the agent's)."""

    @property
    def url(self) -> str: ...
    @property
    def graph_id(self) -> str: ...
    @property
    def cancel_timeout(self) -> float: ...
    @property
    def keep_threads(self) -> bool: ...


__all__ = ["DEADLINE_GRACE", "REMOTE_RUN", "RemoteChild"]

logger = logging.getLogger(__name__)

REMOTE_RUN = "remote_run"
"""The key of the :class:`~deepactors.events.CustomEvent` a remote child emits, under
its own path, as each of its runs starts: ``{"remote_run": {"url", "thread_id",
"run_id"}}`` (only when someone listens to the parent's events)."""

DEADLINE_GRACE = 1.0
"""Seconds a child's run is given on the server past its deadline here. The
parent's own cancel, at the deadline, comes first and says why (a timeout, a
cancelled parent); the server's ends the runs of a parent that is gone."""


@dataclass(slots=True, kw_only=True, eq=False)
class RemoteChild:
    """One remote child at work: its thread, its runs, what it was sent."""

    agent: _Where
    description: str
    path: str
    label: str
    parent: RunContext
    files: Mapping[str, FileRecord]
    budget: Budget | None
    inbox: Inbox | None
    thread_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    runs: list[str] = field(default_factory=list)
    final: Mapping[str, object] | None = None  # the last run's values, when waited for
    charged: bool = False  # what it spent was charged to the parent
    meter: Meter | None = None  # its spending charged as it happens (budgeted, deepactors)
    waiting: bool = False  # its thread waits for a human decision: it stays

    async def run(self, server: Server) -> ChildOutcome:
        """Run the child on ``server`` to its end; see :meth:`RemoteAgent.run_child`."""
        agent = self.agent
        conn = server.lease()
        try:
            try:
                outcome = await self._outcome(conn)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True), anyio.move_on_after(agent.cancel_timeout):
                    await self._cancel(conn)
                    await self._charge_quietly(conn)
                    await self._forget(conn)
                raise
            if not self.waiting:  # (a thread waiting for a human decision stays there)
                # The answer and the file changes are here now: the thread is
                # not needed any more (unless kept), and a delete that fails
                # costs this call nothing.
                with anyio.CancelScope(shield=True), anyio.move_on_after(agent.cancel_timeout):
                    await self._forget(conn)
            return outcome
        finally:
            server.release(conn)

    async def _outcome(self, conn: Connection) -> ChildOutcome:
        """Run the child to its end; what came of it, its spending charged to the parent."""
        agent = self.agent
        sent = dict(self.files)  # the snapshot the diff is taken against
        try:
            await self._follow(conn, sent)
            stop = self.meter.refusal if self.meter is not None else None
            if stop is not None:
                # As a local child's next call is refused: its run is cancelled
                # (and waited for, so that its record says what it spent).
                # Stopped before its server named the run, the thread's runs
                # are looked for: the server may have made one, and may not
                # have seen the stream close (a proxy between them).
                await self._cancel(conn)
                if not self.runs:
                    return self._stopped(stop, None)  # no run was made
            usage, spent, status = await self._spending(conn)
        except RemoteFailure as exc:
            # A failed run (or a broken stream): what its runs spent until then
            # is charged all the same, if its server still says.
            usage = await self._charge_quietly(conn)
            return self._failed(str(exc), usage)
        self._charge(usage, spent)
        if stop is not None and status != "success":  # (else it ended first: as it ended)
            return self._stopped(stop, usage)
        if status != "success":
            why = f"the run {self.runs[-1]} on {agent.url} ended with status {status!r}"
            return self._failed(why, usage)
        try:
            state = await self._state(conn)
        except RemoteFailure as exc:
            return self._failed(str(exc), usage)
        values = state.get("values") if isinstance(state, Mapping) else None
        if not isinstance(state, Mapping) or not isinstance(values, Mapping):
            return self._failed(f"{agent.url} answered the thread's state without values")
        waiting = interrupt_note(state)
        if waiting:
            self.waiting = True
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

    def _stopped(self, refusal: Refusal, usage: Usage | None) -> ChildOutcome:
        """The outcome of a child its parent's budget stopped, as a local child's."""
        emit = self.parent.emit
        if emit is not None:
            run_id = self.runs[-1] if self.runs else self.parent.run_id
            emit(
                BudgetExhausted(
                    path=self.path,
                    run_id=run_id,
                    resource=refusal.resource,
                    limit=refusal.limit,
                    spent=refusal.spent,
                )
            )
        error = refusal.error(f"the rest of the remote run of {self.path}")
        return self._failed(f"{type(error).__name__}: {error}", usage)

    async def _follow(self, conn: Connection, sent: Mapping[str, FileRecord]) -> None:
        """Run the child, and each message sent to it meanwhile, to the last run's end."""
        parent, inbox = self.parent, self.inbox
        kind = await conn.server_kind()
        if kind == "deepactors" and parent.budget is not None:
            # Its spending is charged as its events report it: they are
            # streamed whether or not anyone listens.
            self.meter = meter = Meter(parent.budget)
        else:
            meter = None  # (LangGraph's server: charged at its end, if it says)
        relay = EventRelay(parent.emit, self.path) if parent.emit is not None else None
        streaming = relay is not None or meter is not None
        body = self._first_body(sent, kind if streaming else None, conn.server.lite)
        while True:
            left = remaining_budget(parent.budget, self.budget)
            limits = Limits(timeout=_time_left(), budget=left).configurable()
            if meter is not None:
                meter.begin(left)
            if limits:
                body["config"] = {"configurable": limits}
            run: list[str] = []
            stream = self._request(conn, body, run, meter, relay, streaming=streaming)
            stops: list[Callable[[], Awaitable[None]]] = []
            if inbox is not None:
                stops.append(inbox.wait)
            if meter is not None:
                stops.append(meter.exhausted)
            try:
                await _until(stream, stops)
            except RemoteFailure as exc:
                if exc.status != 422 or body.get("stream_mode") != ["events-lite"] or run:
                    raise
                conn.server.lite = False  # an older deepactors server: all its events
                body["stream_mode"] = ["events"]
                continue
            if meter is not None and meter.refusal is not None:
                return  # stopped by the parent's budget (a message waiting is not run)
            if inbox is None or not inbox.pending:
                return
            # A message came while it worked (or as it finished): a new run on
            # the thread with it, interrupting the current one if it still goes.
            body = {
                **body,
                "input": _input(inbox.take(), None),
                "multitask_strategy": "interrupt",
            }

    def _first_body(
        self, sent: Mapping[str, FileRecord], kind: str | None, lite: bool
    ) -> JSONObject:
        """The first run's request: the brief (and messages sent before it), the files sent.

        ``kind``: the server's kind when the run is streamed (None: its final
        values are waited for); ``lite``: whether it takes ``events-lite``.
        """
        inbox, parent = self.inbox, self.parent
        texts = [self.description, *(inbox.take() if inbox is not None else ())]
        body: JSONObject = {
            "assistant_id": self.agent.graph_id,
            "input": _input(texts, sent),
            "on_disconnect": "cancel",
            "if_not_exists": "create",
            "metadata": {"parent_path": parent.path, "parent_run_id": parent.run_id},
        }
        if kind is not None:
            body["stream_mode"] = [*_modes(kind, lite)]
            body["stream_subgraphs"] = kind == "deepactors"
        return body

    def _request(
        self,
        conn: Connection,
        body: Mapping[str, object],
        run: list[str],
        meter: Meter | None,
        relay: EventRelay | None,
        *,
        streaming: bool,
    ) -> Awaitable[None]:
        """One run's request, to await: its id appended to ``run`` as it starts."""
        agent, parent = self.agent, self.parent

        def on_part(mode: str, data: JSONValue) -> None:
            if meter is not None:
                meter.part(mode, data)
            if relay is not None:
                relay.part(mode, data, run[0] if run else "")

        def on_run(run_id: str) -> None:
            run.append(run_id)
            self.runs.append(run_id)
            if parent.emit is not None:
                # Where the child's run is, for whoever follows the tree
                # (a UI linking to it, a test reading its status).
                where = {"url": agent.url, "thread_id": self.thread_id, "run_id": run_id}
                parent.emit(CustomEvent(path=self.path, run_id=run_id, data={REMOTE_RUN: where}))

        # The run's request carries the trace context (traceparent) of the
        # `task` call that made it: the remote run continues the parent's trace.
        trace = outgoing_headers()
        if not streaming:
            return self._wait(conn, body, on_run, trace)
        path = f"/threads/{self.thread_id}/runs/stream"
        return stream_run(conn, path, body, on_run=on_run, on_part=on_part, extra_headers=trace)

    async def _wait(
        self,
        conn: Connection,
        body: Mapping[str, object],
        on_run: Callable[[str], None],
        trace: Mapping[str, str],
    ) -> None:
        path = f"/threads/{self.thread_id}/runs/wait"
        self.final = None  # (an earlier run's, ended by a message's run, are not the end)
        self.final = await wait_run(conn, path, body, on_run=on_run, extra_headers=trace)

    async def _state(self, conn: Connection) -> object:
        """The thread's final state: as the last run's wait answered, or read from the server."""
        final = self.final
        if final is not None:
            interrupts = final.get("__interrupt__") or []
            values = {k: v for k, v in final.items() if k != "__interrupt__"}
            return {"values": values, "interrupts": interrupts}
        return await conn.call("GET", f"/threads/{self.thread_id}/state")

    async def _spending(self, conn: Connection) -> tuple[Usage | None, dict[str, float], object]:
        """What the child's runs spent, and how the last one ended (its status).

        A stream that closes is not proof of a run's end (a proxy, a server
        shutting down): the run's own status is. Only deepactors servers record
        usage and budget reports in a run's metadata, whichever way the run
        ended; earlier runs (ended by a message's run) count too.

        Raises:
            RemoteFailure: No run was made, or its record could not be read.
        """
        if not self.runs:
            raise RemoteFailure(f"{self.agent.url} streamed no run id for the child's run")
        deepactors = conn.kind == "deepactors"
        usage: Usage | None = None
        spent: dict[str, float] = {}
        status: object = None
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
            used, report = spent_of(run.get("metadata"))
            if used is not None:
                usage = used if usage is None else usage + used
            for key, value in report.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    spent[key] = spent.get(key, 0) + value
        return usage, spent, status

    def _charge(self, usage: Usage | None, spent: Mapping[str, float]) -> None:
        """Add what the child spent to the parent's usage and budget (once).

        What its events charged already (:attr:`meter`) is not charged again:
        only what the runs' records say beyond it (calls that failed or were
        cut off, events missed), never less than nothing.
        """
        if self.charged:
            return
        self.charged = True
        self.parent.add_usage(usage)
        live = self.meter.spent if self.meter is not None else Spent()
        charge(self.parent.budget, recorded(spent, usage).less(live))

    def _charged_live_only(self) -> Usage | None:
        """The runs' records are lost: their usage is what their events reported."""
        meter = self.meter
        if self.charged or meter is None:
            return None
        self.charged = True
        self.parent.add_usage(meter.usage)
        return meter.usage

    async def _charge_quietly(self, conn: Connection) -> Usage | None:
        """Charge what the child's runs spent, as far as its server still says.

        For a child that failed or was cancelled: its runs' records are read
        within ``cancel_timeout`` (a server that is gone or hangs costs no
        more); what cannot be read is not charged.
        """
        if self.charged or not self.runs or conn.kind != "deepactors":
            return self._charged_live_only()  # (LangGraph's server records no usage)
        with anyio.move_on_after(self.agent.cancel_timeout):
            try:
                usage, spent, _ = await self._spending(conn)
            except RemoteFailure as exc:
                logger.debug("reading what remote child %s spent: %s", self.path, exc)
                return self._charged_live_only()
            self._charge(usage, spent)
            return usage
        return self._charged_live_only()

    async def _run_record(self, conn: Connection, run_id: str) -> Mapping[str, object]:
        run = await conn.call("GET", f"/threads/{self.thread_id}/runs/{run_id}")
        if not isinstance(run, Mapping):
            raise RemoteFailure(f"{self.agent.url} answered run {run_id} with {run!r}")
        return run

    async def _cancel(self, conn: Connection) -> None:
        """Cancel the child's run on the server (it may have ended: no matter).

        A deepactors server is asked to answer once the run has ended, so that
        its record then says what it spent.
        """
        run_ids = self.runs[-1:]
        if not run_ids:
            # Cancelled (or stopped by its budget) before the server said
            # which run it made, if it made one: every run of the thread
            # still going. Closing the stream
            # cancels it too (on_disconnect), this is for a server that missed it.
            try:
                listed = await conn.call("GET", f"/threads/{self.thread_id}/runs")
            except RemoteFailure:
                return  # no thread: no run was made
            runs = listed if isinstance(listed, list) else []
            found = [r for r in runs if isinstance(r, Mapping) and "run_id" in r]
            self.runs += [str(r["run_id"]) for r in found]  # the child's, for what they spent
            run_ids = [str(r["run_id"]) for r in found if r.get("status") in ("pending", "running")]
        wait = "?wait=true" if conn.kind == "deepactors" else ""
        for run_id in run_ids:
            try:
                await conn.call("POST", f"/threads/{self.thread_id}/runs/{run_id}/cancel{wait}")
            except RemoteFailure as exc:
                logger.debug("cancelling remote run %s: %s", run_id, exc)

    async def _forget(self, conn: Connection) -> None:
        """Delete the child's thread on the server, unless threads are kept.

        Only once what the child did is here (or will never be): its answer
        and file changes, what it spent. A delete that fails is logged, not
        raised: the child's outcome stands, and the thread stays.
        """
        if self.agent.keep_threads or not self.runs:
            return  # (no run: its thread was never made, or is empty)
        try:
            await conn.call("DELETE", f"/threads/{self.thread_id}")
        except RemoteFailure as exc:
            logger.warning("could not delete remote thread %s: %s", self.thread_id, exc)


async def _until(stream: Awaitable[None], stops: list[Callable[[], Awaitable[None]]]) -> None:
    """Await ``stream`` until it ends or one of ``stops`` returns.

    A stop is a message arriving in the child's inbox, or its parent's budget
    running out. Leaving the stream closes its connection, which cancels the
    run (``on_disconnect``); the next run, with the message, interrupts it
    anyway, and a child its budget stopped cancels it itself too.
    """
    if not stops:
        await stream
        return
    failure: RemoteFailure | None = None

    async def follow(scope: anyio.CancelScope) -> None:
        nonlocal failure
        try:
            await stream
        except RemoteFailure as exc:
            failure = exc  # raised below, not as an exception group
        scope.cancel()

    async def stop(wait: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
        await wait()
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow, tg.cancel_scope)
        for wait in stops:
            tg.start_soon(stop, wait, tg.cancel_scope)
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


def _input(texts: list[str], files: Mapping[str, FileRecord] | None) -> JSONObject:
    values: JSONObject = {"messages": [{"role": "user", "content": t} for t in texts]}
    if files:
        # deepagents' FileData: what both servers take as input and give back as state.
        values["files"] = {p: dict[str, JSONValue](r.to_file_data()) for p, r in files.items()}
    return values

"""Runs of the server: created on a thread, driven under the app's runtime, cancelled.

A run is an actor's order under the app's runtime; no request task owns it.
Its events go straight from the agent to the run's subscribers (SSE
responses, each with a memory object stream of its own) through ``on_event``.
A stateless run is started by :meth:`RunManager.launch` itself and its actor
reports how it ended (``on_done``); any other run has a driver task that the
app's task group owns, which waits out a delay, queues the run on its thread
and reads the thread back from its checkpoint when the run failed.

Everything done to a saved thread goes through its handle under the app's
runtime (``runtime.thread(agent, thread_id)``): runs, state updates, rollbacks
and deletes are orders in the thread actor's mailbox, executed in turn under
the thread's lease; this module never touches a checkpointer. Runs of one
thread take turns there (enqueue). The other multitask strategies act before
the new run is queued: ``reject`` refuses it, ``interrupt`` cancels the runs in
progress and waits for them (the thread keeps what they finished),
``rollback`` also undoes them (an order queued behind them takes the thread
back to where the oldest of them started).

Several server processes may share their runs through a relay (``runs_db``,
see ``_relay.py``): the manager tells it of its own runs (created, started,
each event, finished) without waiting on it except at creation, and a run it
does not know is looked up there and adopted (``_shared_runs.py``), so joining,
streaming and cancelling work through any process. Without a relay nothing of
this costs anything (:class:`LocalRelay`).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TypeVarTuple

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.exceptions import HTTPException

from .._core.jsonvalue import JSONObject
from ..actors import Runtime, ThreadHandle
from ..errors import DeepActorsError, InputError
from ..events import Event
from ..persistence import SqliteThreadMetadata
from ._authz import caller
from ._checkpoints import start_from
from ._records import (
    AssistantRecord,
    ForgottenRun,
    RunRecord,
    Subscriber,
    ThreadRecord,
    ThreadValues,
    new_uuid,
)
from ._retention import DEFAULT_RUN_RETENTION, Retention
from ._run_admission import RunAdmission
from ._run_cancel import RunCanceller
from ._run_driver import RunDriver, Unlaunched
from ._run_inputs import run_input_of, run_kwargs
from ._run_slots import RunSlots
from ._schemas import RunCreate
from ._thread_lookup import ThreadLookup
from ._thread_ttl import ThreadExpiry, ThreadTTL
from ._wire_json import GivenModes
from .auth import Action
from .relay import DEFAULT_STREAM_LOG_BYTES, LocalRelay, RunRelay, SharedRuns
from .webhooks import Webhooks, check_webhook_url

__all__ = ["RunManager"]

Ts = TypeVarTuple("Ts")


class RunManager:
    """Threads and runs of one app, on one runtime.

    The book of threads and runs, with four parts of its own: a
    ``ThreadLookup`` (``lookup``, from ``_thread_lookup``: finding, making and
    keeping threads and their metadata), a ``RunAdmission`` (``_run_admission``:
    the assistant a resume runs as, room made by the multitask strategy), a
    ``RunDriver`` (``_run_driver``: starting runs through their handles,
    delivering their events, recording their ends, reading threads back) and a
    ``RunCanceller`` (``_run_cancel``).

    Args:
        runtime: The runtime every run is an actor of.
        task_group: Owns the driver task of every run.
        assistants: The served agents by graph id.
        relay: Shares runs with other server processes (default: none).
        run_retention: Seconds a finished run's record stays in memory (None:
            for ever); see ``_retention.py``.
        stream_log_bytes: Bytes of frames a resumable run keeps (``_frame_log``).
        webhooks: How the webhooks runs name are called (None: runs may name none).
        max_runs_per_client: Runs one client may have in flight (None: no cap);
            see ``_run_slots``.
        thread_metadata: Where threads' metadata is kept beside their
            checkpoints (None: in memory only); see ``_thread_lookup``.
        thread_ttl: The time to live of a thread made without a ``ttl`` of its
            own, what happens to it then, and how often that is looked at; see
            ``_thread_ttl``.
    """

    def __init__(
        self,
        runtime: Runtime,
        task_group: TaskGroup,
        assistants: Mapping[str, AssistantRecord],
        *,
        relay: RunRelay | None = None,
        run_retention: float | None = DEFAULT_RUN_RETENTION,
        stream_log_bytes: int = DEFAULT_STREAM_LOG_BYTES,
        webhooks: Webhooks | None = None,
        max_runs_per_client: int | None = None,
        thread_metadata: SqliteThreadMetadata | None = None,
        thread_ttl: ThreadTTL = ThreadTTL(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        self.runtime = runtime
        self.webhooks = webhooks
        self.slots = RunSlots(max_runs_per_client)
        self.stream_log_bytes = stream_log_bytes
        self._tg = task_group
        self.relay: RunRelay = relay if relay is not None else LocalRelay()
        self.assistants = dict(assistants)
        self._by_uuid = {a.assistant_id: a for a in assistants.values()}
        self.threads: dict[str, ThreadRecord] = {}
        # Keys of threads forgotten here whose records or metadata are still being
        # deleted: a lookup meanwhile must not find them and make a thread again.
        self.deleting: set[str] = set()
        self.runs: dict[str, RunRecord] = {}
        self._shared = SharedRuns(self.relay, task_group, self)
        self.lookup = ThreadLookup(
            runtime,
            self.relay,
            self._shared,
            assistants=self.assistants,
            threads=self.threads,
            deleting=self.deleting,
            thread_metadata=thread_metadata,
            thread_ttl=thread_ttl,
        )
        self._closing = False
        # Per run created but not launched: its input, context, delay and timeout.
        self._unlaunched: dict[str, Unlaunched] = {}
        self._driver = RunDriver(
            runtime,
            task_group,
            self.relay,
            slots=self.slots,
            webhooks=webhooks,
            thread_handle=self.handle,
            forget_runs=self._forget_runs,
        )
        self._canceller = RunCanceller(
            self.runs,
            task_group,
            self.relay,
            launch=self.launch,
            handle_of=self._driver.handle_of,
        )
        self._admission = RunAdmission(self.assistants, saved=self.saved, make_room=self._make_room)
        self.retention = Retention(
            self.runs,
            run_retention=run_retention,
            # Shared runs are in the runs database, whence a request adopts them again.
            remember=not self.relay.shared,
        )
        task_group.start_soon(self.retention.run)
        self.expiry = ThreadExpiry(self, sweep=thread_ttl.sweep, confirm=self.relay.shared)
        task_group.start_soon(self.expiry.run)

    # -- lookups ---------------------------------------------------------------------

    def assistant(self, assistant_id: str) -> AssistantRecord:
        """The assistant with this id or graph name (404 if none)."""
        found = self.assistants.get(assistant_id) or self._by_uuid.get(assistant_id)
        if found is None:
            known = ", ".join(self.assistants)
            raise HTTPException(404, f"assistant {assistant_id!r} not found (known: {known})")
        return found

    def handle(self, thread: ThreadRecord) -> ThreadHandle:
        """The handle of the thread under the app's runtime, for the assistant it holds."""
        return self.runtime.thread(self.lookup.thread_assistant(thread).agent, thread.thread_id)

    def run(self, thread: ThreadRecord, run_id: str) -> RunRecord:
        """A run of a thread known to this process (404 if none)."""
        run = self.runs.get(run_id)
        if run is None or run.thread.thread_id != thread.thread_id:
            raise HTTPException(404, self.retention.unknown(thread.name, run_id))
        return run

    async def find_run(self, thread_id: str, run_id: str, action: Action = "read") -> RunRecord:
        """A run of the thread the caller names ``thread_id`` and may ``action``,
        here or in another server process (404 if none)."""
        thread = await self.lookup.find_thread(thread_id, action)
        if thread is None:
            raise HTTPException(404, self.retention.unknown(thread_id, run_id))
        if run_id not in self.runs and self.relay.shared:
            await self._shared.adopt_run(thread.thread_id, run_id)
        return self.run(thread, run_id)

    async def find_past(
        self, thread_id: str, run_id: str, action: Action = "read"
    ) -> RunRecord | ForgottenRun:
        """:meth:`find_run`, or what is left of the run once forgotten (404 if neither)."""
        if run_id in self.runs or self.relay.shared:
            return await self.find_run(thread_id, run_id, action)
        thread = await self.lookup.find_thread(thread_id, action)
        past = None if thread is None else thread.forgotten.get(run_id)
        if past is None:
            raise HTTPException(404, self.retention.unknown(thread_id, run_id))
        return past

    async def runs_of(self, thread: ThreadRecord) -> list[RunRecord | ForgottenRun]:
        """The thread's runs, oldest first, with those of other server processes
        and what is left of those it forgot."""
        if self.relay.shared and not thread.temporary:
            await self._shared.adopt_thread(thread.thread_id)
        known: list[RunRecord | ForgottenRun] = [*thread.forgotten.values(), *thread.runs]
        return sorted(known, key=lambda r: r.created_at) if thread.forgotten else known

    # -- creating runs ---------------------------------------------------------------

    async def create(
        self,
        thread: ThreadRecord,
        body: RunCreate,
        *,
        subscriber: Subscriber | None = None,
        launch: bool = True,
    ) -> RunRecord:
        """Validate a run, apply its multitask strategy, and start it.

        With ``launch=False`` the run is created (known, pending, with its id)
        but its driver is started only by :meth:`launch`: a streaming response
        sends its first event before that. Cancelling such a run launches it
        too (its driver then ends it at once), so none is left pending.

        Raises:
            HTTPException: 404 unknown assistant, 409 a busy thread with ``reject``,
                422 invalid input, 429 the client's runs in flight at their cap
                (nothing was started).
        """
        if self._closing:
            raise HTTPException(503, "the server is shutting down")
        # Counted first, before anything of the run is done (a fork, runs
        # interrupted to make room), so a refused run leaves no trace.
        client = self.slots.take()
        try:
            run = await self._create(thread, body, subscriber)
        except BaseException:
            self.slots.give_back(client)
            raise
        run.client = client  # given back when its record is final (``_close``)
        if launch:
            self.launch(run)
        return run

    async def _create(
        self, thread: ThreadRecord, body: RunCreate, subscriber: Subscriber | None
    ) -> RunRecord:
        """:meth:`create`, up to the run known and pending (not launched)."""
        body.refuse_unsupported()
        webhook = None
        if body.webhook is not None:
            try:
                webhook = check_webhook_url(body.webhook, self.webhooks)
            except InputError as exc:
                raise HTTPException(422, str(exc)) from None
        assistant = self.assistant(body.assistant_id)
        if body.command is not None and not thread.temporary:
            assistant = await self._admission.deciding_assistant(thread, assistant)
        # The run acts for its caller: hooks and tools read run.identity.
        identity = caller()
        if thread.temporary:
            if body.command is not None:
                raise HTTPException(422, "command: resuming needs a thread (thread_id)")
            # Its thread is thrown away: an agent that may stop for a human runs,
            # and only an actual stop is an error (InterruptNeedsThread).
            run_input, timeout = run_input_of(
                assistant.stateless, body, None, identity, stateless=True
            )
        else:
            run_input, timeout = run_input_of(assistant.agent, body, thread.thread_id, identity)
        await start_from(self, thread, assistant, body)  # the head, or a fork (a checkpoint)
        await self._admission.admit(thread, body)
        run = RunRecord(
            run_id=new_uuid(),
            thread=thread,
            assistant=assistant,
            kwargs_of=functools.partial(run_kwargs, body),
            metadata=dict(body.metadata or {}),
            multitask_strategy=body.multitask_strategy,
            webhook=webhook,
        )
        if subscriber is not None:
            run.subscribers.append(subscriber)
        thread.graph_id = assistant.graph_id
        # As LangGraph's server does, so clients find a graph's threads by metadata.
        named = "graph_id" in thread.metadata and "assistant_id" in thread.metadata
        thread.metadata.setdefault("graph_id", assistant.graph_id)
        thread.metadata.setdefault("assistant_id", assistant.assistant_id)
        thread.runs.append(run)
        thread.updated_at = time.time()
        self.runs[run.run_id] = run
        if not thread.temporary and (self.relay.shared or not named):
            try:
                if self.relay.shared:
                    await self.relay.created(run)
                if not named:  # its first run: the metadata names its graph now
                    await self.lookup.save_metadata(thread)
            except BaseException:
                self.runs.pop(run.run_id, None)
                thread.runs.remove(run)
                raise
        self._unlaunched[run.run_id] = (run_input, body.context, body.after_seconds, timeout)
        thread.tell(run)  # joins of the thread's stream follow it from its start
        return run

    def start_soon(
        self, func: Callable[[*Ts], Coroutine[object, object, None]], *args: *Ts
    ) -> None:
        """Run ``func(*args)`` in the app's task group: work that outlives the
        request that started it (a resumable stream's frames, after its client left)."""
        self._tg.start_soon(func, *args)

    def launch(self, run: RunRecord) -> None:
        """Start a run created with ``launch=False`` (later calls: nothing).

        A stateless run with no delay starts here and now, with no task of its
        own: its actor reports how it ended (``on_done``). Any other gets a
        driver task: a delay to wait out, a thread's mailbox that may be full.
        """
        start = self._unlaunched.pop(run.run_id, None)
        if start is not None:
            self._driver.launch(run, start)

    # -- what the run manager's parts do -------------------------------------------

    async def load_saved(self) -> None:
        """Know the threads the checkpointers already hold (at start-up; see
        ``ThreadLookup.load_saved``)."""
        await self.lookup.load_saved()

    async def saved(self, thread: ThreadRecord, *, fresh: bool = False) -> ThreadValues:
        """The thread's saved values and interrupts as JSON (see ``RunDriver.saved``)."""
        return await self._driver.saved(thread, fresh=fresh)

    async def refresh(self, thread: ThreadRecord) -> None:
        """Read the thread again from its checkpoint (another process changed it)."""
        await self._driver.saved(thread, fresh=True)

    async def result(self, run: RunRecord) -> JSONObject:
        """Wait for the run; its final values as JSON (``__error__`` if it failed)."""
        return await self._driver.result(run)

    async def past_result(self, past: ForgottenRun, thread: ThreadRecord) -> JSONObject:
        """What joining a forgotten run answers (see ``RunDriver.past_result``)."""
        return await self._driver.past_result(past, thread)

    def cancel_soon(self, run: RunRecord) -> None:
        """Cancel a run without waiting (a client that left)."""
        self._canceller.cancel_soon(run)

    def cancel_requested(self, run_id: str, action: str) -> None:
        """Another process asks to cancel a run of this one (through the relay)."""
        self._canceller.cancel_requested(run_id, action)

    async def cancel(self, runs: list[RunRecord], *, action: str = "interrupt", wait: bool) -> None:
        """Cancel runs (their whole subtrees); with ``rollback``, also undo them."""
        await self._canceller.cancel(runs, action=action, wait=wait)

    async def _make_room(
        self, thread: ThreadRecord, inflight: list[RunRecord], strategy: str
    ) -> None:
        await self._canceller.make_room(thread, inflight, strategy)

    async def subscribe(
        self, run: RunRecord, *, modes: GivenModes, subgraphs: bool
    ) -> MemoryObjectReceiveStream[Event | bytes]:
        """A stream of the run's events from now on (ends at once if the run ended).

        Without ``subgraphs``, subagents' events are left out. A run of another
        process streams SSE frames it rendered in ``modes``.
        """
        send, receive = anyio.create_memory_object_stream[Event | bytes](math.inf)
        if run.done.is_set():
            send.close()
        elif run.remote:
            await self.relay.watch(run, send, modes, subgraphs)
        else:
            run.subscribers.append(Subscriber(send, subgraphs))
        return receive

    async def delete_thread(self, thread: ThreadRecord) -> None:
        """Cancel the thread's runs, then forget it and its checkpoint."""
        await self.cancel(thread.inflight, wait=True)
        self.deleting.add(thread.thread_id)
        try:
            await self._forget_thread(thread)
            if self.relay.shared:
                await self.relay.thread_deleted(thread.thread_id)
            await self.lookup.forget_metadata(thread)
        finally:
            self.deleting.discard(thread.thread_id)

    def _forget_runs(self, thread: ThreadRecord) -> None:
        self.threads.pop(thread.thread_id, None)
        thread.close_watchers()
        for run in thread.runs:
            self.runs.pop(run.run_id, None)
        # The thread lets go of its runs: one still held (by a response) holds
        # its thread, never the reverse, so reference counting frees both.
        thread.runs = []
        thread.forgotten.clear()

    async def _forget_thread(self, thread: ThreadRecord) -> None:
        self._forget_runs(thread)
        if thread.temporary:
            return
        done: set[int] = set()
        for assistant in self.assistants.values():
            # Once per database: assistants of one checkpointer share its threads.
            if id(assistant.agent.checkpointer) not in done:
                done.add(id(assistant.agent.checkpointer))
                await self.runtime.thread(assistant.agent, thread.thread_id).delete()

    async def update_state(self, thread: ThreadRecord, values: Mapping[str, object]) -> None:
        """Apply ``values`` to the thread's state, in turn with its runs (no model call)."""
        assistant = self.lookup.thread_assistant(thread)
        try:
            await self.runtime.thread(assistant.agent, thread.thread_id).update_state(values)
        except DeepActorsError as exc:
            raise HTTPException(422, f"values: {exc}") from None
        thread.graph_id = assistant.graph_id
        thread.updated_at = time.time()

    async def aclose(self) -> None:
        """Cancel every run and wait for all of them (server shutdown)."""
        self._closing = True
        self.retention.close()
        self.expiry.close()
        await self.cancel([r for r in self.runs.values() if not r.remote], wait=True)
        self._shared.close()  # runs of other processes go on there

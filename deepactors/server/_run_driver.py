"""How a server run is started, driven and recorded: :class:`RunDriver`, a part of the run manager.

Every run starts through a handle under the app's runtime: its thread's
(``runtime.thread(agent, thread_id)``), or for a stateless run no thread's
(``runtime.thread(agent)``). A stateless run with no delay starts at once and
its actor reports how it ended (``on_done``); any other run has a driver task
that the app's task group owns, which waits out a delay and queues the run on
its thread if it is not queued yet. Events go straight from the agent to the
run's subscribers (``on_event``), with no task in between. A thread's values
are read through its handle (:meth:`RunDriver.saved`), never kept here.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import anyio
from anyio.abc import TaskGroup

from .._core.jsonvalue import JSONObject
from ..actors import OneShotHandle, RunHandle, RunInput, Runtime, ThreadHandle, ThreadState
from ..errors import DeepActorsError, RunCancelled
from ..events import Event
from ..langchain.views import interrupts_to_lc, values_to_lc
from ..tracing import run_traces
from ._records import NO_VALUES, ForgottenRun, RunRecord, Subscriber, ThreadRecord, ThreadValues
from ._run_inputs import error_result
from ._run_slots import RunSlots
from ._wire_json import RunStatus
from .relay import RunRelay
from .webhooks import Webhooks, deliver
from .webhooks import payload as webhook_payload

__all__ = ["RunDriver", "Unlaunched", "thread_values", "traced_into"]


def _outcome(handle: RunHandle) -> tuple[RunStatus, JSONObject | None]:
    """How an ended run ended: its status, and its values (or its error) as JSON."""
    try:
        values = handle.result_nowait()
    except RunCancelled:
        return "interrupted", None
    except TimeoutError:
        return "timeout", None
    except Exception as exc:
        return "error", error_result(exc)
    try:
        return "success", values_to_lc(values)
    except Exception as exc:  # a state that has no JSON shape: said, as the run's error
        return "error", error_result(exc)


def _record_usage(run: RunRecord, handle: RunHandle) -> None:
    """Put the tree's usage and cost (and its budget report) in the run's metadata.

    For every run that ended, failed, cancelled and timed out ones too: a
    remote parent charges what its child spent to its own budget, whichever
    way the child ended.
    """
    usage = handle.usage
    if usage is not None:
        run.metadata["usage"] = usage.model_dump()  # tokens, requests and cost_usd
    budget = handle.budget_report
    if budget is not None:
        run.metadata["budget"] = {
            "model_calls": budget.model_calls,
            "input_tokens": budget.input_tokens,
            "output_tokens": budget.output_tokens,
            "tool_calls": budget.tool_calls,
            "usd": budget.usd,
            "exhausted": list(budget.exhausted),
        }


@contextmanager
def traced_into(run: RunRecord) -> Iterator[None]:
    """Put the trace of the run started in the block in the run's metadata.

    ``trace_id`` (what a trace viewer's link takes) and ``traceparent`` (its
    top-level span), when the run is traced: known as soon as it is ordered,
    so a UI can link to the trace of a run still queued or running. Nothing
    when tracing is off, or when starting it failed.
    """
    with run_traces() as traces:
        yield
    if traces:
        trace = traces[-1]
        run.metadata["trace_id"] = trace.trace_id
        run.metadata["traceparent"] = trace.traceparent


def _drop_traceback(handle: RunHandle) -> None:
    """Let go of the frames of a failed run's error (and of the errors it chains).

    The record keeps the error as JSON. The frames of its traceback hold the
    run's event callback, hence this record, and the frame that caught it holds
    the error back: a cycle that only a collection frees, and ``deepactors
    serve`` defers and freezes collections. Without the traceback, reference
    counting frees them all.
    """
    try:
        handle.result_nowait()
    except (Exception, KeyboardInterrupt, SystemExit) as exc:
        chain: list[BaseException | None] = [exc]
        seen: set[int] = set()
        while chain:
            error = chain.pop()
            if error is None or id(error) in seen:
                continue
            seen.add(id(error))
            error.__traceback__ = None
            chain += (error.__cause__, error.__context__)


# What a created run is launched with: its input, context, delay and timeout.
Unlaunched = tuple[RunInput, Mapping[str, object] | None, float | None, float | None]


class RunDriver:
    """Starts runs through their handles, delivers their events, records their ends.

    A part of the run manager (which owns the threads and runs it drives).

    Args:
        runtime: The app's runtime, every run an actor of it.
        task_group: Owns the driver tasks (and the webhooks' deliveries).
        relay: Tells other server processes of the runs (when shared).
        slots: The runs in flight per client, each given back when its run's
            record is final.
        webhooks: How the webhooks runs name are called (None: none).
        thread_handle: The handle of a thread, for the assistant it holds.
        forget_runs: Forgets a thread and its runs (a stateless run's, once ended).
    """

    __slots__ = (
        "_forget_runs",
        "_relay",
        "_runtime",
        "_slots",
        "_tg",
        "_thread_handle",
        "_webhooks",
    )

    def __init__(
        self,
        runtime: Runtime,
        task_group: TaskGroup,
        relay: RunRelay,
        *,
        slots: RunSlots,
        webhooks: Webhooks | None,
        thread_handle: Callable[[ThreadRecord], ThreadHandle],
        forget_runs: Callable[[ThreadRecord], None],
    ) -> None:
        self._runtime = runtime
        self._tg = task_group
        self._relay = relay
        self._slots = slots
        self._webhooks = webhooks
        self._thread_handle = thread_handle
        self._forget_runs = forget_runs

    def handle_of(self, run: RunRecord) -> ThreadHandle:
        """The handle of the run's thread, for the run's assistant."""
        return self._runtime.thread(run.assistant.agent, run.thread.thread_id)

    def starter(self, run: RunRecord) -> ThreadHandle | OneShotHandle:
        """The handle the run starts through: its thread's, or, stateless, no thread's."""
        if run.thread.temporary:
            return self._runtime.thread(run.assistant.stateless)
        return self.handle_of(run)

    def launch(self, run: RunRecord, start: Unlaunched) -> None:
        """Start a created run (see ``RunManager.launch``)."""
        run_input, context, after, timeout = start
        if after or not run.thread.temporary:
            if not after and run.cancel_requested is None:
                # Queued here and now, so the thread's runs take their turns in
                # the order they were created (driver tasks may start in any order).
                try:
                    with traced_into(run):
                        run.handle = self.starter(run).start_nowait(
                            run_input,
                            context=context,
                            timeout=timeout,
                            on_event=self._deliverer(run),
                        )
                except anyio.WouldBlock:
                    pass  # a full mailbox: the driver waits for room
                except Exception as exc:
                    self._tg.start_soon(self._finish, run, "error", error_result(exc))
                    return
            self._tg.start_soon(self._drive, run, run_input, context, after, timeout)
            return
        if run.cancel_requested is not None:
            self._end_now(run, "interrupted", None)
            return
        try:
            with traced_into(run):
                run.handle = self.starter(run).start_nowait(
                    run_input,
                    context=context,
                    timeout=timeout,
                    on_event=self._deliverer(run),
                    on_done=functools.partial(self._ended, run),
                )
        except Exception as exc:
            # Starting it failed (the runtime is closing, say): the run failed.
            self._end_now(run, "error", error_result(exc))

    async def _drive(
        self,
        run: RunRecord,
        run_input: RunInput,
        context: Mapping[str, object] | None,
        after: float | None,
        timeout: float | None = None,
    ) -> None:
        status: RunStatus = "error"
        result: JSONObject | None = None
        try:
            if after:
                with anyio.move_on_after(after):
                    await run.cancelled.wait()
            # (No pause for the pacer here: the run's start is a paced step of
            # its actor, so a burst of new runs starts in slices anyway.)
            handle = run.handle
            if handle is None:
                if run.cancel_requested is not None:
                    status = "interrupted"
                    return
                with traced_into(run):
                    handle = await self.starter(run).start(
                        run_input,
                        context=context,
                        timeout=timeout,
                        on_event=self._deliverer(run),
                    )
                run.handle = handle
            if run.cancel_requested is not None:
                handle.cancel()
            await handle.wait()
            status, result = _outcome(handle)
            _record_usage(run, handle)
        except Exception as exc:
            # Starting it failed (the runtime is closing, say): the run failed.
            result = error_result(exc)
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish(run, status, result)

    def _deliverer(self, run: RunRecord) -> Callable[[Event], None]:
        """What the run calls with each of its events, as it happens."""
        relay = self._relay if self._relay.shared and not run.thread.temporary else None
        gone: list[Subscriber] = []

        def deliver(event: Event) -> None:
            # Straight into the listeners' streams, with no task in between
            # (one wake-up per event fewer, and no events batched behind it).
            if run.status == "pending":
                run.status = "running"
                run.updated_at = time.time()
                if relay is not None:
                    relay.started(run)
            if relay is not None:
                relay.event(run, event)
            for subscriber in run.subscribers:
                if subscriber.wants(event):
                    try:
                        subscriber.stream.send_nowait(event)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        subscriber.stream.close()  # that listener left
                        gone.append(subscriber)
            if gone:
                for subscriber in gone:
                    run.subscribers.remove(subscriber)
                gone.clear()

        return deliver

    def _ended(self, run: RunRecord, handle: RunHandle) -> None:
        """A stateless run started by :meth:`launch` has ended (its actor calls this)."""
        status: RunStatus = "error"
        result: JSONObject | None = None
        try:
            status, result = _outcome(handle)
            _record_usage(run, handle)
        finally:  # a KeyboardInterrupt from a tool goes on, after the record
            self._end_now(run, status, result)

    def _end_now(self, run: RunRecord, status: RunStatus, result: JSONObject | None) -> None:
        """:meth:`_finish` for a stateless run, whose end needs no await."""
        assert run.thread.temporary
        self._settle(run, status, result)
        self._close(run)

    async def _finish(self, run: RunRecord, status: RunStatus, result: JSONObject | None) -> None:
        values = result
        try:
            self._settle(run, status, result)
            if values is None and self._relay.shared:
                # Other processes read what the thread holds now (its checkpoint).
                values = (await self.saved(run.thread)).joined()
        except DeepActorsError:
            pass  # the run's own outcome is set; others read the thread themselves
        finally:
            self._close(run, values)

    def _settle(self, run: RunRecord, status: RunStatus, result: JSONObject | None) -> None:
        """Record how a run ended, as far as that needs no await."""
        run.status = status
        run.updated_at = run.finished_at = time.time()
        run.result = result
        for subscriber in run.subscribers:
            subscriber.stream.close()
        run.subscribers.clear()
        thread = run.thread
        if thread.temporary:
            self._forget_runs(thread)
        else:
            thread.error = status == "error"  # shown until a run of it ends otherwise

    def _close(self, run: RunRecord, values: JSONObject | None = None) -> None:
        """The run's record is final: tell other processes, and whoever waits."""
        thread = run.thread
        thread.updated_at = time.time()
        if self._relay.shared and not thread.temporary:
            self._relay.finished(run, values if values is not None else {})
        handle = run.handle
        if handle is not None:
            # The handle holds the run's final state (the record has it as JSON)
            # or its error. A rollback of the run needs no more than where it started.
            _drop_traceback(handle)
            handle.forget_outcome()
            run.handle = None if thread.temporary else handle
        self._slots.give_back(run.client)  # no longer in flight
        run.client = None
        run.done.set()
        if run.webhook is not None and self._webhooks is not None:
            body = webhook_payload(run.to_json(), run.result, self._webhooks.max_body)
            self._tg.start_soon(self._deliver, run.webhook, body, run.run_id)

    async def _deliver(self, url: str, body: bytes, run_id: str) -> None:
        assert self._webhooks is not None
        await deliver(url, body, self._webhooks, delivery_id=run_id)

    async def saved(self, thread: ThreadRecord, *, fresh: bool = False) -> ThreadValues:
        """The thread's saved values and interrupts as JSON, read through its handle.

        Memoized on the thread's head by its actor (``ThreadHandle.view``): a
        thread polled by its client is read and rendered once per change.

        Args:
            fresh: Read it again whatever is kept (another process wrote it).
        """
        if thread.temporary:
            return NO_VALUES
        return await self._thread_handle(thread).view(thread_values, fresh=fresh)

    async def refresh(self, thread: ThreadRecord) -> None:
        """Read the thread again from its checkpoint (another process changed it)."""
        await self.saved(thread, fresh=True)

    async def result(self, run: RunRecord) -> JSONObject:
        """Wait for the run; its final values as JSON (``__error__`` if it failed)."""
        await run.done.wait()
        if run.result is not None:
            return run.result
        return (await self.saved(run.thread)).joined()

    async def past_result(self, past: ForgottenRun, thread: ThreadRecord) -> JSONObject:
        """What joining a forgotten run answers: its error, else its thread's
        values as they are now (read from its checkpoint if let go of), as
        LangGraph's join answers the thread's values."""
        if past.error is not None:
            return past.error
        return (await self.saved(thread)).joined()


def thread_values(state: ThreadState) -> ThreadValues:
    """A thread's saved state as the protocol shows it (what :meth:`RunDriver.saved` keeps,
    and a checkpoint's state in the thread endpoints)."""
    return ThreadValues(
        values=values_to_lc(state.values) if state.seq is not None else None,
        interrupts=interrupts_to_lc(list(state.interrupts)),
        stopped=state.stopped,
        next=state.next,
    )

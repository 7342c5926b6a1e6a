"""How a server run is driven and how its end is recorded (the run manager's half).

A stateless run is started by the manager itself and its actor reports how it
ended (``on_done``); any other run has a driver task that the app's task group
owns, which waits out a delay, queues the run on its thread if it is not queued
yet, and reads the thread back through its handle when the run failed. Events
go straight from the agent to the run's subscribers (``on_event``), with no
task in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..actors import RunHandle, RunInput, Runtime, ThreadHandle
from ..errors import DeepActorsError, RunCancelled
from ..events import Event
from ..lc_views import interrupts_to_lc, values_to_lc
from ..tracing import run_traces
from ._records import ForgottenRun, RunRecord, RunStatus, Subscriber, ThreadRecord
from ._run_inputs import error_json
from ._run_slots import RunSlots
from .relay import RunRelay
from .webhooks import Webhooks, deliver
from .webhooks import payload as webhook_payload

__all__ = ["RunDriver", "traced_into"]


def _outcome(handle: RunHandle) -> tuple[RunStatus, dict[str, Any] | None]:
    """How an ended run ended: its status, and its values (or its error) as JSON."""
    try:
        values = handle.result_nowait()
    except RunCancelled:
        return "interrupted", None
    except TimeoutError:
        return "timeout", None
    except Exception as exc:
        return "error", {"__error__": error_json(exc)}
    try:
        return "success", values_to_lc(values)
    except Exception as exc:  # a state that has no JSON shape: said, as the run's error
        return "error", {"__error__": error_json(exc)}


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


def _spent(handle: RunHandle) -> RunHandle:
    """A handle of an ended run with nothing of its outcome: where it started."""
    spent = RunHandle(path=handle.path, thread_id=handle.thread_id, deadline=handle.deadline)
    spent.head_before = handle.head_before
    return spent


class RunDriver:
    """Driving runs and recording their ends; mixed into the run manager."""

    __slots__ = ()

    runtime: Runtime
    relay: RunRelay
    webhooks: Webhooks | None
    slots: RunSlots
    _tg: TaskGroup

    def handle(self, thread: ThreadRecord) -> ThreadHandle:
        """The thread's handle (see the run manager)."""
        raise NotImplementedError

    def _handle_of(self, run: RunRecord) -> ThreadHandle:
        raise NotImplementedError

    def _forget_runs(self, thread: ThreadRecord) -> None:
        raise NotImplementedError

    async def _drive(
        self,
        run: RunRecord,
        run_input: RunInput,
        context: Mapping[str, Any] | None,
        after: float | None,
        timeout: float | None = None,
    ) -> None:
        status: RunStatus = "error"
        result: dict[str, Any] | None = None
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
                    if run.thread.temporary:
                        handle = await self.runtime.start(
                            run.assistant.stateless,
                            run_input,
                            context=context,
                            timeout=timeout,
                            on_event=self._deliverer(run),
                        )
                    else:
                        handle = await self._handle_of(run).start(
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
            result = {"__error__": error_json(exc)}
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish(run, status, result)

    def _deliverer(self, run: RunRecord) -> Callable[[Event], None]:
        """What the run calls with each of its events, as it happens."""
        relay = self.relay if self.relay.shared and not run.thread.temporary else None
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
        """A run started by :meth:`launch` itself has ended (its actor calls this)."""
        status: RunStatus = "error"
        result: dict[str, Any] | None = None
        try:
            status, result = _outcome(handle)
            _record_usage(run, handle)
        finally:  # a KeyboardInterrupt from a tool goes on, after the record
            self._end_now(run, status, result)

    def _end_now(self, run: RunRecord, status: RunStatus, result: dict[str, Any] | None) -> None:
        """:meth:`_finish` for a stateless run, whose end needs no await."""
        assert run.thread.temporary
        self._settle(run, status, result)
        self._close(run)

    async def _finish(
        self, run: RunRecord, status: RunStatus, result: dict[str, Any] | None
    ) -> None:
        try:
            if self._settle(run, status, result):
                await self.refresh(run.thread)
        except DeepActorsError:
            pass  # the record stays as it was; the run's own outcome is set
        finally:
            self._close(run)

    def _settle(self, run: RunRecord, status: RunStatus, result: dict[str, Any] | None) -> bool:
        """Record how a run ended, as far as that needs no await.

        Returns:
            Whether the thread's values must be read back from its checkpoint.
        """
        run.status = status
        run.updated_at = run.finished_at = time.time()
        run.result = result
        for subscriber in run.subscribers:
            subscriber.stream.close()
        run.subscribers.clear()
        thread = run.thread
        if thread.temporary:
            self._forget_runs(thread)
        elif status == "success" and result is not None and not thread.inflight[1:]:
            thread.values = {k: v for k, v in result.items() if k != "__interrupt__"}
            thread.interrupts = result.get("__interrupt__", [])
            thread.error = False
            thread.stale = False
        else:
            thread.error = status == "error"
            return True
        return False

    def _close(self, run: RunRecord) -> None:
        """The run's record is final: tell other processes, and whoever waits."""
        thread = run.thread
        thread.updated_at = time.time()
        if self.relay.shared and not thread.temporary:
            self.relay.finished(run, self._values(run))
        handle = run.handle
        if handle is not None:
            # The handle holds the run's final state (the record has it as JSON)
            # or its error. A rollback of the run needs no more than where it started.
            _drop_traceback(handle)
            run.handle = None if thread.temporary else _spent(handle)
        self.slots.give_back(run.client)  # no longer in flight
        run.client = None
        run.done.set()
        if run.webhook is not None and self.webhooks is not None:
            body = webhook_payload(run.to_json(), run.result, self.webhooks.max_body)
            self._tg.start_soon(self._deliver, run.webhook, body, run.run_id)

    async def _deliver(self, url: str, body: bytes, run_id: str) -> None:
        assert self.webhooks is not None
        await deliver(url, body, self.webhooks, delivery_id=run_id)

    async def refresh(self, thread: ThreadRecord) -> None:
        """Read the thread's values and interrupts back from its checkpoint."""
        state = await self.handle(thread).state()
        thread.values = values_to_lc(state.values) if state.seq is not None else None
        thread.interrupts = interrupts_to_lc(list(state.interrupts))
        thread.stale = False
        thread.read_at = time.time()

    async def result(self, run: RunRecord) -> dict[str, Any]:
        """Wait for the run; its final values as JSON (``__error__`` if it failed)."""
        await run.done.wait()
        if run.result is None and run.thread.stale:
            await self.refresh(run.thread)  # its values were let go: from its checkpoint
        return self._values(run)

    async def past_result(self, past: ForgottenRun, thread: ThreadRecord) -> dict[str, Any]:
        """What joining a forgotten run answers: its error, else its thread's
        values as they are now (read from its checkpoint if let go of), as
        LangGraph's join answers the thread's values."""
        if past.error is not None:
            return past.error
        if thread.stale:
            await self.refresh(thread)
        values = dict(thread.values or {})
        if thread.interrupts:
            values["__interrupt__"] = thread.interrupts
        return values

    def _values(self, run: RunRecord) -> dict[str, Any]:
        if run.result is not None:
            return run.result
        thread = run.thread
        if thread.values is None and not thread.temporary:
            return {}
        values = dict(thread.values or {})
        if thread.interrupts:
            values["__interrupt__"] = thread.interrupts
        return values

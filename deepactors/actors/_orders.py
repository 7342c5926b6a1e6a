"""Making a run's order: its handle, where its events go, and its tracer.

The runtime makes one for every run it is asked for (see :mod:`._runtime`);
kept apart so that the runtime's module holds the hosting of actors only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..events import Event, RunFinished
from ..tracing import Tracing, tree_tracer
from ._actor import RunHandle, RunOptions, RunOrder, deadline
from ._spec import RunInput

__all__ = ["make_order", "unqueued"]


def make_order(
    path: str,
    thread_id: str | None,
    run_input: RunInput,
    options: RunOptions,
    tracing: Tracing | None,
) -> RunOrder:
    """The order of a run of the agent ``path`` on ``thread_id``.

    With ``tracing``, the run's tracer is made here, and its top-level span
    starts here: the run's trace is known as soon as it is ordered.
    """
    send: MemoryObjectSendStream[Event] | None = None
    receive: MemoryObjectReceiveStream[Event] | None = None
    if options.stream:
        # Unbounded: emitting must never block the agent (or need an await on
        # its hot path); the consumer's pace is its own business.
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
    handle = RunHandle._create(
        path=path, thread_id=thread_id, deadline=deadline(options.timeout), events=receive
    )
    on_event = options.on_event
    emit: Callable[[Event], None] | None = None
    if send is not None and on_event is not None:
        put = send.send_nowait

        def emit(event: Event) -> None:
            put(event)
            on_event(event)

    elif send is not None:
        emit = send.send_nowait
    else:
        emit = on_event
    listen = emit
    tracer = None
    if tracing is not None:
        tracer = tree_tracer(tracing, thread_id=thread_id, path=handle.path, run_id=handle.run_id)
        if tracer is not None:
            emit = _chain(emit, tracer)
    return RunOrder(
        handle=handle,
        input=run_input,
        emit_stream=send,
        emit=emit,
        on_done=options.on_done,
        listen=listen,
        trace=tracer,
    )


def unqueued(order: RunOrder, error: BaseException) -> None:
    """End the trace of a run that was ordered but never queued.

    Its top-level span starts where it is ordered (see :func:`make_order`); a
    caller that gave up waiting for room in the thread's mailbox, or a runtime
    that closed meanwhile, would leave that span open for ever (never exported).
    """
    if order.trace is None:
        return
    cancelled = isinstance(error, anyio.get_cancelled_exc_class())
    order.trace(
        RunFinished(
            path=order.handle.path,
            run_id=order.handle.run_id,
            outcome="cancelled" if cancelled else "failed",
            error=f"never queued: {type(error).__name__}" + (f": {error}" if str(error) else ""),
        )
    )


def _chain(
    emit: Callable[[Event], None] | None, then: Callable[[Event], None]
) -> Callable[[Event], None]:
    """``emit``, then ``then``: the run's listeners, and its tracer."""
    if emit is None:
        return then
    first = emit

    def both(event: Event) -> None:
        first(event)
        then(event)

    return both

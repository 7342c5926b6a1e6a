"""Event streams of runs: an async context manager that is also an async iterator.

:func:`event_stream` makes one (``DeepAgent.astream`` does): what it is given
starts the run through a handle, on the runtime the stream runs under.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import final

import anyio
import anyio.lowlevel

from .._core.public import NoPublicConstructor
from ..events import Event
from ..state import AgentResult
from ._runtime import RunHandle, Runtime, await_handle, open_runtime

__all__ = ["EventStream", "event_stream"]


def event_stream(
    start: Callable[[Runtime], Awaitable[RunHandle]], *, runtime: Runtime | None = None
) -> EventStream:
    """The events of the run ``start`` starts, as an :class:`EventStream`.

    Args:
        start: Called with the runtime when the stream is entered; starts the
            run with ``stream=True`` through a handle
            (``rt.thread(agent, thread_id).start(input, stream=True)``) and
            returns its run handle.
        runtime: The runtime to run under; without one, the stream opens a
            runtime when it is entered and closes it when it is left.
    """
    return EventStream._create(start, runtime=runtime)


@final
class EventStream(metaclass=NoPublicConstructor):
    """The events of one run, in the order they happened.

    ``async with stream: async for event in stream`` is the robust form: leaving
    the block (early, or on an error) cancels the run and waits for it to stop,
    within the task that entered it. Plain ``async for event in stream`` also works
    when the loop is read to its end.

    Attributes:
        result: The run's final state, once the stream has ended.
        handle: The run's handle (cancel it to stop the run), once started.
    """

    _obtain = "get one from agent.astream(...) or deepactors.actors.event_stream(...)"

    def __init__(
        self,
        start: Callable[[Runtime], Awaitable[RunHandle]],
        *,
        runtime: Runtime | None,
    ) -> None:
        self._start = start
        self._runtime = runtime
        self._stack: AsyncExitStack | None = None
        self.handle: RunHandle | None = None
        self.result: AgentResult | None = None

    async def __aenter__(self) -> EventStream:
        if self._stack is not None:
            raise RuntimeError("an EventStream can be entered only once")
        stack = AsyncExitStack()
        await stack.__aenter__()
        self._stack = stack
        try:
            rt = self._runtime
            if rt is None:
                rt = await stack.enter_async_context(open_runtime())
                rt.keeps_background = False  # closed when the stream ends
            self.handle = await self._start(rt)
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._stack is not None
        handle = self.handle
        try:
            if handle is not None:
                if not handle.done:
                    handle.cancel()
                with anyio.CancelScope(shield=True):
                    await handle.wait()
                if handle.events is not None:
                    handle.events.close()
        finally:
            # The run is over by now; keep the caller's exception out of the task
            # group, which would wrap it in an ExceptionGroup, and let it propagate.
            await self._stack.__aexit__(None, None, None)
        return None

    async def __anext__(self) -> Event:
        handle = self.handle
        if handle is None or handle.events is None:
            raise RuntimeError("enter the stream first: async with agent.astream(...) as s")
        events = handle.events
        try:
            try:
                # What is queued already is taken without a trip round the loop
                # (a stream's receive() yields once per event even when one is
                # there); cancellation is still seen here.
                await anyio.lowlevel.checkpoint_if_cancelled()
                return events.receive_nowait()
            except anyio.WouldBlock:
                return await events.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            # The run is over: surface its error here, or keep its result.
            self.result = await await_handle(handle)
            raise StopAsyncIteration from None

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._stack is not None:
            return self
        return self._read_all()

    async def _read_all(self) -> AsyncIterator[Event]:
        async with self:
            while True:
                try:
                    event = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield event

"""``agent.astream(..., stream_mode=...)``: a run's events in LangGraph's stream shapes.

A deepagents script iterates ``agent.stream(input, stream_mode="values")`` and
gets state dicts, or ``(mode, data)`` pairs for a list of modes, or
``(namespace, ...)`` tuples with ``subgraphs=True``. This wraps the typed event
stream of the run and turns each event into those parts
(:class:`~deepactors.langchain.views.LangGraphStream`, with deepactors objects as data).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

from ..actors import EventStream
from ..langchain.views import LangGraphStream, StreamPart
from ..state import AgentResult

__all__ = ["StreamParts"]


class StreamParts:
    """The LangGraph-shaped parts of one run; use it like :class:`EventStream`.

    ``async with agent.astream(..., stream_mode=...) as parts: async for p in parts``,
    or plain ``async for`` when read to the end. ``parts.result`` holds the final
    state afterwards.
    """

    def __init__(
        self, events: EventStream, adapter: LangGraphStream, *, single: bool, subgraphs: bool
    ) -> None:
        self._events = events
        self._adapter = adapter
        self._single = single
        self._subgraphs = subgraphs
        self._pending: deque[StreamPart] = deque()
        self._entered = False

    @property
    def result(self) -> AgentResult | None:
        """The run's final state, once the stream has ended."""
        return self._events.result

    async def __aenter__(self) -> StreamParts:
        await self._events.__aenter__()
        self._entered = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._events.__aexit__(exc_type, exc, tb)

    async def __anext__(self) -> Any:
        while not self._pending:
            event = await self._events.__anext__()  # StopAsyncIteration at the end
            self._pending.extend(self._adapter.feed(event))
        return self._shape(self._pending.popleft())

    def __aiter__(self) -> AsyncIterator[Any]:
        return self if self._entered else self._read_all()

    async def _read_all(self) -> AsyncIterator[Any]:
        async with self:
            while True:
                try:
                    part = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield part

    def _shape(self, part: StreamPart) -> Any:
        # LangGraph's shapes: one mode yields its data, a list of modes (mode,
        # data); with subgraphs, the namespace comes first.
        head: tuple[Any, ...] = (part.namespace,) if self._subgraphs else ()
        if self._single:
            return (*head, part.data) if head else part.data
        return (*head, part.mode, part.data)

"""An agent that answers in LangChain's message objects: the port-by-imports switch.

``from deepactors.langchain import create_deep_agent`` builds the same agent as
:func:`deepactors.create_deep_agent`, wrapped so that what a deepagents script
reads is what LangGraph would give it: ``result["messages"]`` holds
``langchain_core`` ``HumanMessage`` / ``AIMessage`` / ``ToolMessage`` objects, and
``stream_mode`` streams carry them too (``AIMessageChunk`` in ``messages`` mode).
``isinstance(msg, AIMessage)``, ``msg.pretty_print()`` and ``tool_call["name"]``
then work unchanged. The typed event stream (``astream`` without
``stream_mode``) stays deepactors' own.

:func:`as_langchain` wraps an agent already built.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from ..actors import EventStream
from ..agent import DeepAgent
from ..factory import create_deep_agent as _create_deep_agent
from ._messages import lc_objects

__all__ = ["LangChainAgent", "as_langchain", "create_deep_agent"]


class LangChainAgent(DeepAgent):
    """A :class:`~deepactors.agent.DeepAgent` whose results and ``stream_mode`` parts
    hold ``langchain_core`` messages. Build one with :func:`create_deep_agent` or
    :func:`as_langchain`."""

    __slots__ = ()

    async def ainvoke(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """:meth:`DeepAgent.ainvoke`, its messages as LangChain objects (``invoke`` too)."""
        return _result(await super().ainvoke(*args, **kwargs))

    def astream(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`DeepAgent.astream`; with ``stream_mode``, parts hold LangChain objects.

        ``stream`` goes through here, so it yields the same.
        """
        stream = super().astream(*args, **kwargs)
        if not isinstance(stream, EventStream):  # LangGraph's parts (with stream_mode)
            modes = kwargs["stream_mode"]
            return _LangChainParts(stream, modes, subgraphs=bool(kwargs.get("subgraphs")))
        return stream


def create_deep_agent(*args: Any, **kwargs: Any) -> LangChainAgent:
    """:func:`deepactors.create_deep_agent`, answering in LangChain's message objects.

    Takes the same arguments; see :mod:`deepactors.langchain._agent` for what differs.
    """
    return as_langchain(_create_deep_agent(*args, **kwargs))


def as_langchain(agent: DeepAgent) -> LangChainAgent:
    """The same agent (same parts, same threads), answering in LangChain's objects."""
    return LangChainAgent(agent.spec)


def _result(result: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(result)
    if "messages" in out:
        out["messages"] = lc_objects(list(out["messages"]))
    return out


def _part(part: Any, modes: str | Sequence[str], *, subgraphs: bool) -> Any:
    """One stream part with its messages as LangChain objects.

    Only the ``messages`` mode's pieces become ``AIMessageChunk``; whole messages
    in ``updates`` and ``values`` become ``AIMessage``.
    """
    if isinstance(modes, str):
        return lc_objects(part, chunks=modes == "messages")
    if subgraphs:
        ns, mode, data = part
        return (ns, mode, lc_objects(data, chunks=mode == "messages"))
    mode, data = part
    return (mode, lc_objects(data, chunks=mode == "messages"))


class _LangChainParts:
    """A run's ``stream_mode`` parts with LangChain objects; used as the parts are
    (``async with`` / ``async for``)."""

    def __init__(self, parts: Any, modes: str | Sequence[str], *, subgraphs: bool) -> None:
        self._parts = parts
        self._modes = modes
        self._subgraphs = subgraphs

    @property
    def result(self) -> dict[str, Any] | None:
        """The run's final state (its messages as LangChain objects), once ended."""
        result = self._parts.result
        return None if result is None else _result(result)

    async def __aenter__(self) -> _LangChainParts:
        await self._parts.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return bool(await self._parts.__aexit__(exc_type, exc, tb))

    async def __anext__(self) -> Any:
        return self._convert(await self._parts.__anext__())

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._read(self._parts.__aiter__())

    async def _read(self, parts: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for part in parts:
            yield self._convert(part)

    def _convert(self, part: Any) -> Any:
        return _part(part, self._modes, subgraphs=self._subgraphs)

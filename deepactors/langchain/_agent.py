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

import dataclasses
import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar

import anyio

from ..actors import AgentSpec, EventStream, ThreadState
from ..agent import DeepAgent
from ..assembly import create_deep_agent as _create_deep_agent
from ..errors import ConfigurationError, InputError, StepLimitExceeded
from ..hooks import AgentMiddleware
from ..tools import Command
from ._errors import GraphRecursionError
from ._events import langchain_events
from ._graph import AgentGraph, agent_graph
from ._messages import lc_objects

__all__ = ["LangChainAgent", "as_langchain", "create_deep_agent"]


class LangChainAgent(DeepAgent):
    """A :class:`~deepactors.agent.DeepAgent` whose results and ``stream_mode`` parts
    hold ``langchain_core`` messages. Build one with :func:`create_deep_agent` or
    :func:`as_langchain`."""

    __slots__ = ("_defaults",)

    _tool_namespaces = True  # ("tools:<id>",), as LangGraph names subgraph namespaces
    _sync_loop: ClassVar[str] = "asyncio"

    def __init__(self, spec: AgentSpec, defaults: Mapping[str, object] | None = None) -> None:
        super().__init__(spec)
        self._defaults: Mapping[str, object] = defaults or {}

    def with_config(
        self, config: Mapping[str, object] | None = None, **kwargs: object
    ) -> LangChainAgent:
        """The same agent with ``config`` under every call's own (LangChain's ``with_config``).

        ``configurable`` and ``metadata`` merge, ``tags`` add up, anything else a
        call gives wins.
        """
        merged = _merge(self._defaults, {**(config or {}), **kwargs})
        return type(self)(self.spec, merged)

    def batch(self, inputs: Sequence[Any], config: Any = None, **kwargs: Any) -> list[Any]:
        """:meth:`invoke` each input, in order (``config`` one for all, or one per input)."""
        configs = _configs(config, len(inputs))
        return [self.invoke(i, c, **kwargs) for i, c in zip(inputs, configs, strict=True)]

    async def abatch(self, inputs: Sequence[Any], config: Any = None, **kwargs: Any) -> list[Any]:
        """:meth:`ainvoke` every input at once; the results in the inputs' order."""
        configs = _configs(config, len(inputs))
        results: list[Any] = [None] * len(inputs)

        async def one(index: int) -> None:
            results[index] = await self.ainvoke(inputs[index], configs[index], **kwargs)

        async with anyio.create_task_group() as tg:
            for index in range(len(inputs)):
                tg.start_soon(one, index)
        return results

    async def aget_state(self, *args: Any, **kwargs: Any) -> ThreadState:
        """:meth:`DeepAgent.aget_state`, its messages as LangChain objects (``get_state`` too)."""
        state = await super().aget_state(*args, **kwargs)
        values = _values(state.values)
        if "messages" in values:
            values["messages"] = lc_objects(list(values["messages"]))
        return dataclasses.replace(
            state, values=values, interrupts=tuple(_described(state.interrupts))
        )

    def astream_events(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        version: str = "v2",
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's events as LangChain's ``astream_events`` dicts (see ``_events``).

        Raises:
            InputError: A ``version`` other than ``"v2"``.
        """
        if version != "v2":
            raise InputError(f"astream_events supports version='v2', not {version!r}")
        args, kwargs = self._configured((config,), kwargs)
        tags = (args[0] or {}).get("tags") or ()
        events = super().astream(_input(input), *args, **kwargs)
        return langchain_events(events, tags=list(tags))

    def get_graph(
        self, config: Mapping[str, object] | None = None, *, xray: bool = False
    ) -> AgentGraph:
        """The agent loop as LangGraph draws it: ``.nodes``, ``.edges``, ``draw_mermaid()``."""
        hooks = [
            f"{mw.name}.{hook}"
            for hook in _HOOKS
            for mw in self.spec.middleware
            if getattr(type(mw), hook) is not getattr(AgentMiddleware, hook)
        ]
        return agent_graph(self.spec.name, hooks, has_tools=bool(self.spec.tools))

    def _configured(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A call's ``config`` (positional or keyword) with :meth:`with_config`'s under it."""
        if not self._defaults:
            return args, kwargs
        if args:
            return (_merge(self._defaults, args[0] or {}), *args[1:]), kwargs
        return args, {**kwargs, "config": _merge(self._defaults, kwargs.get("config") or {})}

    def on_loop(self, backend: str) -> LangChainAgent:
        """The same agent, its sync ``invoke`` and ``stream`` on ``backend`` by default.

        Args:
            backend: ``"asyncio"`` or ``"trio"``.
        """
        if backend not in _BY_LOOP:
            raise ConfigurationError(f"backend must be 'asyncio' or 'trio', not {backend!r}")
        return _BY_LOOP[backend](self.spec, self._defaults)

    # LangChain's result: its message objects, not deepactors' typed AgentResult.
    def invoke(  # type: ignore[override]
        self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """:meth:`DeepAgent.invoke`, on this agent's loop unless ``backend=`` says."""
        kwargs.setdefault("backend", self._sync_loop)
        return super().invoke(input, config, **kwargs)

    def stream(
        self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """:meth:`DeepAgent.stream`, on this agent's loop unless ``backend=`` says."""
        kwargs.setdefault("backend", self._sync_loop)
        return super().stream(input, config, **kwargs)

    async def ainvoke(  # type: ignore[override]  # LangChain's result (see invoke)
        self, input: Any, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """:meth:`DeepAgent.ainvoke`, its messages as LangChain objects (``invoke`` too).

        LangGraph's ``Command(resume=...)`` is taken as deepactors' own.
        """
        args, kwargs = self._configured(args, kwargs)
        try:
            return _result(await super().ainvoke(_input(input), *args, **kwargs))
        except StepLimitExceeded as exc:
            raise _recursion(exc) from exc

    def astream(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`DeepAgent.astream`; with ``stream_mode``, parts hold LangChain objects.

        ``stream`` goes through here, so it yields the same.
        """
        if args:
            rest, kwargs = self._configured(args[1:], kwargs)
            args = (_input(args[0]), *rest)
        stream = super().astream(*args, **kwargs)
        if not isinstance(stream, EventStream):  # LangGraph's parts (with stream_mode)
            modes = kwargs["stream_mode"]
            return _LangChainParts(stream, modes, subgraphs=bool(kwargs.get("subgraphs")))
        return stream


_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")


class _TrioAgent(LangChainAgent):
    __slots__ = ()
    _sync_loop = "trio"


_BY_LOOP: dict[str, type[LangChainAgent]] = {"asyncio": LangChainAgent, "trio": _TrioAgent}


def create_deep_agent(*args: Any, **kwargs: Any) -> LangChainAgent:
    """:func:`deepactors.create_deep_agent`, answering in LangChain's message objects.

    Takes the same arguments; see :mod:`deepactors.langchain._agent` for what differs.
    """
    return as_langchain(_create_deep_agent(*args, **kwargs))


def as_langchain(agent: DeepAgent) -> LangChainAgent:
    """The same agent (same parts, same threads), answering in LangChain's objects."""
    if isinstance(agent, LangChainAgent):
        return agent
    return LangChainAgent(agent.spec)


def _recursion(exc: StepLimitExceeded) -> StepLimitExceeded:
    """LangGraph's error for a step limit (as is when it already is one)."""
    return exc if isinstance(exc, GraphRecursionError) else GraphRecursionError(str(exc))


def _merge(base: Mapping[str, object], top: Mapping[str, object]) -> dict[str, object]:
    out = {**base, **top}
    for key in ("configurable", "metadata"):
        if key in base and key in top:
            out[key] = {**_mapping(base[key], key), **_mapping(top[key], key)}
    if "tags" in base and "tags" in top:
        out["tags"] = [*_tags(base["tags"]), *_tags(top["tags"])]
    return out


def _mapping(value: object, key: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise InputError(f"config[{key!r}] must be a mapping, not {type(value).__name__}")
    return value


def _tags(value: object) -> Iterable[object]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InputError(f"config['tags'] must be a list of tags, not {type(value).__name__}")
    return value


def _configs(config: Any, count: int) -> list[Any]:
    if isinstance(config, list | tuple):
        if len(config) != count:
            raise InputError(f"{len(config)} configs for {count} inputs")
        return list(config)
    return [config] * count


def _input(value: Any) -> Any:
    """LangGraph's ``Command(resume=...)`` as deepactors' :class:`~deepactors.Command`."""
    cls = type(value)
    if cls.__name__ == "Command" and cls.__module__.startswith("langgraph"):
        if value.goto or value.graph is not None or value.update is not None:
            raise InputError(
                "a run's Command may only resume (Command(resume=...)); goto, graph and "
                "update have no place in deepactors (update a thread with update_state)"
            )
        return Command(resume=value.resume)
    return value


def _result(result: Mapping[str, Any]) -> dict[str, Any]:
    out = _values(result)
    if "messages" in out:
        out["messages"] = lc_objects(list(out["messages"]))
    return out


# Channels LangGraph leaves out of a state until something writes them; here they
# always exist, so their empty value stands for "never written".
_UNWRITTEN: dict[str, object] = {"todos": [], "structured_response": None}


def _values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A state as LangGraph shows it: unwritten channels left out, interrupts described."""
    out = {k: v for k, v in values.items() if not (k in _UNWRITTEN and v == _UNWRITTEN[k])}
    if "__interrupt__" in out:
        out["__interrupt__"] = _described(out["__interrupt__"])
    return out


def _described(pending: Any) -> Any:
    """Interrupts whose action requests all have a ``description``.

    A request that was configured without one gets the text LangChain's
    ``HumanInTheLoopMiddleware`` writes by default (tool name and arguments).
    """
    out = []
    for request in pending:
        value = getattr(request, "value", None)
        if not isinstance(value, Mapping) or all(
            a.get("description") for a in value.get("action_requests", ())
        ):
            out.append(request)
            continue
        actions = [
            {**a, "description": a.get("description") or _description(a)}
            for a in value["action_requests"]
        ]
        out.append(
            type(request)(request, id=request.id, value={**value, "action_requests": actions})
        )
    return type(pending)(out) if isinstance(pending, list | tuple) else out


def _description(action: Mapping[str, object]) -> str:
    args = json.dumps(action.get("args", {}), indent=2, default=str)
    return f"Tool execution requires approval\n\nTool: {action.get('name')}\nArgs: {args}"


def _lc(data: object, *, chunks: bool) -> object:
    converted = lc_objects(data, chunks=chunks)
    if isinstance(converted, dict) and "__interrupt__" in converted:
        converted = {**converted, "__interrupt__": _described(converted["__interrupt__"])}
    return converted


def _part(part: Any, modes: str | Sequence[str], *, subgraphs: bool) -> object:
    """One stream part with its messages as LangChain objects.

    Only the ``messages`` mode's pieces become ``AIMessageChunk``; whole messages
    in ``updates`` and ``values`` become ``AIMessage``.
    """
    if isinstance(modes, str):
        if subgraphs:
            ns, data = part
            return (ns, _lc(data, chunks=modes == "messages"))
        return _lc(part, chunks=modes == "messages")
    if subgraphs:
        ns, mode, data = part
        return (ns, mode, _lc(data, chunks=mode == "messages"))
    mode, data = part
    return (mode, _lc(data, chunks=mode == "messages"))


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

    async def __anext__(self) -> object:
        try:
            return self._convert(await self._parts.__anext__())
        except StepLimitExceeded as exc:
            raise _recursion(exc) from exc

    def __aiter__(self) -> AsyncIterator[object]:
        return self._read(self._parts.__aiter__())

    async def _read(self, parts: AsyncIterator[object]) -> AsyncIterator[object]:
        try:
            async for part in parts:
                yield self._convert(part)
        except StepLimitExceeded as exc:
            raise _recursion(exc) from exc

    def _convert(self, part: object) -> object:
        return _part(part, self._modes, subgraphs=self._subgraphs)

"""The agent object :func:`~deepactors.create_deep_agent` returns: a thin facade.

It validates a run's input once and hands it to the actor runtime
(:mod:`deepactors.actors`), which owns everything about running it.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import anyio
import sniffio

from ..actors import (
    AgentSpec,
    EventStream,
    RunHandle,
    RunInput,
    RunOptions,
    Runtime,
    await_handle,
    open_runtime,
    prepare_input,
    run_sync,
    stream_sync,
)
from ..budget import Budget
from ..errors import InputError
from ..lc_views import LangGraphStream
from ..middleware import tree_models
from ..models import SupportsAclose
from ..tools import Command
from ._config import check_timeout, read_config, warn_if_unsaved
from ._lg_stream import StreamParts
from ._parts import AgentParts
from ._saved import SavedThreads

__all__ = ["DeepAgent"]

AgentInput = Mapping[str, Any] | str | Command | None


class DeepAgent(AgentParts, SavedThreads):
    """An agent made by :func:`create_deep_agent`. Run it with :meth:`ainvoke`.

    The object is immutable and shareable: any number of runs, on any number of
    threads and event loops, may use one agent at once. Its parts are read as
    attributes (:class:`AgentParts`); saved threads with :meth:`aget_state` and
    :meth:`ahistory` (:class:`SavedThreads`).
    """

    __slots__ = ()

    # Subagent namespaces in stream_mode parts: LangGraph's ("tools:<id>",) or the
    # actor path's ("task-1:worker",) (see LangGraphStream).
    _tool_namespaces: ClassVar[bool] = False

    # -- running -------------------------------------------------------------------

    async def ainvoke(
        self,
        input: AgentInput,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: object = None,
        budget: Budget | None = None,
        runtime: Runtime | None = None,
    ) -> dict[str, Any]:
        """Run the agent to completion and return its final state.

        Args:
            input: ``{"messages": [...], "files": {...}}``, a plain string as one
                user message, ``None`` to continue a saved thread, or
                ``Command(resume=...)`` with decisions for an interrupted one.
            config: LangGraph's config, for ported scripts: ``{"configurable":
                {"thread_id": ...}, "recursion_limit": n}`` (``n // 2`` model calls
                per agent).
            thread_id: The conversation to continue. Runs on one thread queue, one
                after the other. Without a checkpointer, a thread is kept only by a
                runtime's thread actor (see :func:`open_runtime`).
            timeout: Seconds for the whole run, every subagent included, the wait
                behind earlier runs of the thread too. Past it, everything the run
                started is cancelled and ``TimeoutError`` raised.
            context: What hooks and tools read as ``run.context`` (checked against
                ``context_schema``).
            budget: Limits on what the run and every subagent may spend together.
            runtime: A runtime from :func:`open_runtime` to run under; without one,
                the run opens its own task group inside the caller's task.

        Returns:
            The state: ``messages``, ``todos``, ``files``, ``structured_response``,
            ``usage`` (tokens of this run, or ``None``) and ``budget`` (a report).

        Raises:
            InputError: Invalid input, before any model call.
            TimeoutError: The run passed ``timeout``.
            StepLimitExceeded: The model kept calling tools past ``max_steps``.
        """
        # Fail before opening anything.
        check_timeout(timeout)
        thread_id, run_input = self._prepare(
            input, config, thread_id, runtime, context=context, budget=budget
        )
        options = RunOptions(timeout=timeout)
        if runtime is not None:
            handle = await runtime.submit(self._spec, thread_id, run_input, options)
            return await await_handle(handle)
        async with open_runtime() as rt:
            rt.keeps_background = False  # closed when this call returns
            handle = await rt.submit(self._spec, thread_id, run_input, options)
            await handle.wait()
        # Raised outside the task group, so callers get the run's own exception
        # rather than an ExceptionGroup around it.
        return await handle.result()

    def astream(
        self,
        input: AgentInput,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: object = None,
        budget: Budget | None = None,
        runtime: Runtime | None = None,
        stream_mode: str | Sequence[str] | None = None,
        subgraphs: bool = False,
    ) -> EventStream | StreamParts:
        """Run the agent and stream its events as they happen.

        Use it as ``async with agent.astream(...) as events: async for e in events``
        (the form that is safe to leave early, for example in a server whose
        client went away), or directly as ``async for e in agent.astream(...)``
        when you read to the end. ``stream.result`` holds the final state after.

        With ``stream_mode`` (``"values"``, ``"updates"``, ``"messages"``,
        ``"custom"``, or a list), it yields LangGraph's shapes instead of typed
        events, as a deepagents script expects; ``subgraphs=True`` adds the
        subagents' parts under their namespaces.

        Raises:
            InputError: Invalid input (at once, before the stream is entered).
        """
        check_timeout(timeout)
        thread_id, run_input = self._prepare(
            input, config, thread_id, runtime, context=context, budget=budget
        )

        options = RunOptions(timeout=timeout, stream=True)

        async def start(rt: Runtime) -> RunHandle:
            return await rt.submit(self._spec, thread_id, run_input, options)

        events = EventStream(start, runtime=runtime)
        if stream_mode is None:
            return events
        try:
            tags = config.get("tags") if isinstance(config, Mapping) else None
            adapter = LangGraphStream(
                stream_mode,
                subgraphs=subgraphs,
                thread_id=thread_id,
                objects=True,
                tags=tags if isinstance(tags, list | tuple) else (),
                tool_namespaces=self._tool_namespaces,
            )
        except ValueError as exc:
            raise InputError(str(exc)) from None
        return StreamParts(
            events, adapter, single=isinstance(stream_mode, str), subgraphs=subgraphs
        )

    def invoke(
        self,
        input: AgentInput,
        config: Mapping[str, Any] | None = None,
        *,
        backend: str = "asyncio",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Blocking :meth:`ainvoke`, on the kept event loop of ``backend``.

        Every sync call of the process runs on one loop per backend that lives in a
        daemon thread (see :mod:`deepactors.actors._sync`): any number of calls, from
        any thread, also from one whose own loop is running (a notebook cell). Models'
        clients made on it (LangChain's cached ones too) stay valid between calls.
        """

        _check_kwargs("invoke", DeepAgent.ainvoke, kwargs)

        async def invoke() -> dict[str, Any]:
            async with _sync_use(self._spec):
                return await self.ainvoke(input, config, **kwargs)

        return run_sync(invoke, backend=backend)

    def stream(
        self,
        input: AgentInput,
        config: Mapping[str, Any] | None = None,
        *,
        backend: str = "asyncio",
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Blocking :meth:`astream`: yields events (or, with ``stream_mode``, parts),
        on the kept event loop of ``backend`` (as :meth:`invoke`)."""

        _check_kwargs("stream", DeepAgent.astream, kwargs)

        @asynccontextmanager
        async def opened() -> AsyncIterator[EventStream | StreamParts]:
            async with _sync_use(self._spec), self.astream(input, config, **kwargs) as events:
                yield events

        return stream_sync(opened, backend=backend)

    def _prepare(
        self,
        input: AgentInput,
        config: Mapping[str, Any] | None,
        thread_id: str | None,
        runtime: Runtime | None,
        *,
        context: Any = None,
        budget: Budget | None = None,
    ) -> tuple[str | None, RunInput]:
        options = read_config(config, thread_id)
        run_input = prepare_input(
            self._spec, input, options.thread_id, context=context, budget=budget
        )
        if options.max_steps is not None:
            run_input = dataclasses.replace(run_input, max_steps=options.max_steps)
        warn_if_unsaved(options.thread_id, checkpointer=self._spec.checkpointer, runtime=runtime)
        return options.thread_id, run_input


# Sync calls run on the kept loops (actors._sync), where a model's HTTP client made
# for one call would live as long as the process. Each is closed when the last sync
# call using its model on that loop ends: a program that builds agents on the fly
# keeps no client per model for good, and no call closes a client another call of
# the same model is still using.
_sync_users: dict[tuple[int, str], int] = {}
_sync_users_lock = threading.Lock()


@asynccontextmanager
async def _sync_use(spec: AgentSpec) -> AsyncIterator[None]:
    loop = sniffio.current_async_library()
    models = [m for m in tree_models(spec) if isinstance(m, SupportsAclose)]
    with _sync_users_lock:
        for model in models:
            key = (id(model), loop)
            _sync_users[key] = _sync_users.get(key, 0) + 1
    try:
        yield
    finally:
        last = []
        with _sync_users_lock:
            for model in models:
                key = (id(model), loop)
                left = _sync_users[key] - 1
                if left:
                    _sync_users[key] = left
                else:
                    del _sync_users[key]
                    last.append(model)
        with anyio.CancelScope(shield=True):
            for model in last:
                await model.aclose()


def _check_kwargs(name: str, target: Any, kwargs: Mapping[str, Any]) -> None:
    """A misspelt keyword of a sync method named as the caller wrote it (not its async twin)."""
    known = inspect.signature(target).parameters
    for key in kwargs:
        if key not in known:
            raise TypeError(f"DeepAgent.{name}() got an unexpected keyword argument {key!r}")

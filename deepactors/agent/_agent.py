"""The agent object :func:`~deepactors.create_deep_agent` returns: a thin facade.

It validates a run's input once and hands it to the actor runtime
(:mod:`deepactors.actors`), which owns everything about running it.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import sniffio

from ..actors import (
    AgentSpec,
    EventStream,
    RunHandle,
    RunInput,
    Runtime,
    ThreadHandle,
    ThreadState,
    await_handle,
    event_stream,
    open_runtime,
    prepare_input,
    run_sync,
    stream_sync,
)
from ..budget import Budget
from ..errors import ConfigurationError, InputError
from ..hooks import AgentMiddleware
from ..langchain.views import LangGraphStream
from ..limits import Limits
from ..middleware import tree_models
from ..models import ChatModel, SupportsAclose
from ..persistence import CheckpointRecord
from ..state import AgentResult
from ..tools import Command, Tool
from ._config import read_config, warn_if_unsaved
from ._lg_stream import StreamParts
from ._saved import on_thread, thread_named

if TYPE_CHECKING:
    from ..backends import Backend
    from ..persistence import Checkpointer, Store

__all__ = ["DeepAgent"]

AgentInput = Mapping[str, object] | str | Command | None


class DeepAgent:
    """An agent made by :func:`create_deep_agent`. Run it with :meth:`ainvoke`.

    The object is immutable and shareable: any number of runs, on any number of
    threads and event loops, may use one agent at once. Its parts are read as
    attributes (``agent.model``, ``agent.tools``); saved threads with
    :meth:`aget_state` and :meth:`ahistory`, through the thread's handle.

    Args:
        spec: The agent's resolved parts (what ``create_deep_agent`` makes).
    """

    __slots__ = ("_spec",)

    # Subagent namespaces in stream_mode parts: LangGraph's ("tools:<id>",) or the
    # actor path's ("task-1:worker",) (see LangGraphStream).
    _tool_namespaces: ClassVar[bool] = False

    def __init__(self, spec: AgentSpec) -> None:
        self._spec = spec

    def __repr__(self) -> str:
        s = self._spec
        return (
            f"<DeepAgent {s.name!r} model={s.model.model_name!r} tools={len(s.tools)} "
            f"middleware={[mw.name for mw in s.middleware]}>"
        )

    @property
    def spec(self) -> AgentSpec:
        """The agent's resolved parts, as the runtime runs them."""
        return self._spec

    @property
    def name(self) -> str:
        """The agent's name, also the root of its actor paths."""
        return self._spec.name

    @property
    def model(self) -> ChatModel:
        """The model the agent calls."""
        return self._spec.model

    @property
    def tools(self) -> Mapping[str, Tool]:
        """Every tool the model sees, by name."""
        return self._spec.tools

    @property
    def system_prompt(self) -> str | None:
        """The full system prompt, middleware sections included."""
        return self._spec.system_prompt

    @property
    def middleware(self) -> Sequence[AgentMiddleware]:
        """The middleware stack, outermost first."""
        return self._spec.middleware

    @property
    def backend(self) -> Backend | None:
        """Where the file tools keep files."""
        return self._spec.backend

    @property
    def store(self) -> Store | None:
        """The long-term store, if any."""
        return self._spec.store

    @property
    def checkpointer(self) -> Checkpointer | None:
        """Where threads are saved, if anywhere."""
        return self._spec.checkpointer

    # -- running -------------------------------------------------------------------

    async def ainvoke(
        self,
        input: AgentInput,
        config: Mapping[str, object] | None = None,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: object = None,
        budget: Budget | None = None,
        runtime: Runtime | None = None,
        interrupt_before: str | Sequence[str] | None = None,
        interrupt_after: str | Sequence[str] | None = None,
    ) -> AgentResult:
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
            interrupt_before: Nodes (``"model"``, ``"tools"``, ``"*"``) this run
                stops before, the thread saved there (None: the agent's own);
                ``ainvoke(None, ...)`` continues it. See ``docs/hitl.md``.
            interrupt_after: Nodes this run stops after, likewise.

        Returns:
            The final state, an :class:`~deepactors.state.AgentResult` (a dict of
            its channels, with typed attributes): ``messages``, ``todos``,
            ``files``, ``structured_response``, ``usage`` (tokens of this run, or
            ``None``), ``budget`` (a report) and ``interrupts``.

        Raises:
            InputError: Invalid input, before any model call.
            TimeoutError: The run passed ``timeout``.
            StepLimitExceeded: The model kept calling tools past ``max_steps``.
        """
        # Fail before opening anything.
        thread_id, run_input, limits = self._prepare(
            input,
            config,
            thread_id,
            runtime,
            context=context,
            timeout=timeout,
            budget=budget,
            stops=(interrupt_before, interrupt_after),
        )
        if runtime is not None:
            handle = await runtime.thread(self, thread_id).start(run_input, timeout=limits.timeout)
            return await await_handle(handle)
        async with open_runtime() as rt:
            rt.keeps_background = False  # closed when this call returns
            handle = await rt.thread(self, thread_id).start(run_input, timeout=limits.timeout)
            await handle.wait()
        # Raised outside the task group, so callers get the run's own exception
        # rather than an ExceptionGroup around it.
        return await handle.result()

    def astream(
        self,
        input: AgentInput,
        config: Mapping[str, object] | None = None,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: object = None,
        budget: Budget | None = None,
        runtime: Runtime | None = None,
        stream_mode: str | Sequence[str] | None = None,
        subgraphs: bool = False,
        interrupt_before: str | Sequence[str] | None = None,
        interrupt_after: str | Sequence[str] | None = None,
    ) -> EventStream | StreamParts:
        """Run the agent and stream its events as they happen.

        Use it as ``async with agent.astream(...) as events: async for e in events``
        (the form that is safe to leave early, for example in a server whose
        client went away), or directly as ``async for e in agent.astream(...)``
        when you read to the end. ``stream.result`` holds the final state after.

        With ``stream_mode`` (``"values"``, ``"updates"``, ``"messages"``,
        ``"custom"``, or a list), it yields LangGraph's shapes instead of typed
        events, as a deepagents script expects; ``subgraphs=True`` adds the
        subagents' parts under their namespaces. ``interrupt_before`` and
        ``interrupt_after`` are :meth:`ainvoke`'s.

        Raises:
            InputError: Invalid input (at once, before the stream is entered).
        """
        thread_id, run_input, limits = self._prepare(
            input,
            config,
            thread_id,
            runtime,
            context=context,
            timeout=timeout,
            budget=budget,
            stops=(interrupt_before, interrupt_after),
        )

        async def start(rt: Runtime) -> RunHandle:
            handle = rt.thread(self, thread_id)
            return await handle.start(run_input, timeout=limits.timeout, stream=True)

        events = event_stream(start, runtime=runtime)
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
        config: Mapping[str, object] | None = None,
        *,
        backend: str = "asyncio",
        **kwargs: Any,
    ) -> AgentResult:
        """Blocking :meth:`ainvoke`, on the kept event loop of ``backend``.

        Every sync call of the process runs on one loop per backend that lives in a
        daemon thread (see :mod:`deepactors.actors._sync`): any number of calls, from
        any thread, also from one whose own loop is running (a notebook cell). Models'
        clients made on it (LangChain's cached ones too) stay valid between calls.
        """

        _check_kwargs("invoke", DeepAgent.ainvoke, kwargs)

        async def invoke() -> AgentResult:
            async with _sync_use(self._spec):
                return await self.ainvoke(input, config, **kwargs)

        return run_sync(invoke, backend=backend)

    def stream(
        self,
        input: AgentInput,
        config: Mapping[str, object] | None = None,
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
        config: Mapping[str, object] | None,
        thread_id: str | None,
        runtime: Runtime | None,
        *,
        context: object = None,
        timeout: object = None,
        budget: Budget | None = None,
        stops: tuple[object, object] = (None, None),
    ) -> tuple[str | None, RunInput, Limits]:
        """The run's thread, its input, its limits and its breakpoints, each checked once."""
        options = read_config(config, thread_id)
        limits = Limits.of(timeout=timeout, recursion_limit=options.recursion_limit, budget=budget)
        before, after = stops
        run_input = prepare_input(
            self._spec,
            input,
            options.thread_id,
            context=context,
            limits=limits,
            breakpoints=None
            if before is None and after is None
            else self._spec.breakpoints.over(before, after),
        )
        warn_if_unsaved(options.thread_id, checkpointer=self._spec.checkpointer, runtime=runtime)
        return options.thread_id, run_input, limits

    # -- saved threads -----------------------------------------------------------

    async def ahistory(
        self, thread_id: str | Mapping[str, object], *, runtime: Runtime | None = None
    ) -> list[CheckpointRecord]:
        """Every checkpoint record of a thread that counts, oldest first (every actor).

        Each record has ``seq`` (its position), ``path`` (the actor), ``step`` (that
        actor's model calls so far), ``kind`` (``update``, ``tool_result``,
        ``interrupt``, ``resume``) and ``created_at``. Records a rollback took
        back are left out.

        Raises:
            ConfigurationError: The agent has no checkpointer.
        """
        return await on_thread(self, thread_id, runtime, lambda h: h.history())

    async def aget_state(
        self,
        thread: str | Mapping[str, object],
        *,
        upto_seq: int | None = None,
        path: str | None = None,
        runtime: Runtime | None = None,
    ) -> ThreadState:
        """A thread's state as saved, now or as it was at record ``upto_seq``.

        Args:
            thread: The thread id, or LangGraph's ``config`` naming it.
            upto_seq: Rebuild from the records up to this one (see :meth:`ahistory`).
            path: Another actor of the tree (a subagent, ``main/task-2:researcher``).
            runtime: The runtime whose thread actor to ask (default: one of its own).

        Returns:
            The channel values (``state["messages"]``), also readable as LangGraph's
            snapshot: ``.values``, ``.next``, ``.tasks``, ``.config``.

        Raises:
            ConfigurationError: The agent has no checkpointer.
            CheckpointCorrupt: A record cannot be read; the error names the thread.
        """
        return await on_thread(
            self, thread, runtime, lambda h: h.state(upto_seq=upto_seq, path=path)
        )

    def get_state(self, thread: str | Mapping[str, object], **kwargs: Any) -> ThreadState:
        """Blocking :meth:`aget_state`."""
        return run_sync(self.aget_state, thread, backend="asyncio", **kwargs)

    async def aget_state_history(
        self, thread: str | Mapping[str, object], *, runtime: Runtime | None = None
    ) -> list[ThreadState]:
        """The thread's state after each of its top-level records, newest first.

        LangGraph's ``get_state_history`` order; each snapshot's ``seq`` says
        which record it ends at.
        """

        async def states(handle: ThreadHandle) -> list[ThreadState]:
            records = await handle.history(path=self.spec.name)
            return [await handle.state(upto_seq=r.seq) for r in reversed(records)]

        return await on_thread(self, thread, runtime, states)

    def get_state_history(self, thread: str | Mapping[str, object]) -> Iterator[ThreadState]:
        """Blocking :meth:`aget_state_history`."""
        return iter(run_sync(self.aget_state_history, thread, backend="asyncio"))

    async def aupdate_state(
        self,
        thread: str | Mapping[str, object],
        values: Mapping[str, object],
        as_node: str | None = None,
        *,
        runtime: Runtime | None = None,
    ) -> dict[str, dict[str, str]]:
        """Apply ``values`` to a saved thread's state, in turn with its runs.

        LangGraph's ``update_state``: the values go through the channels'
        reducers (``messages`` append or replace by id, ``todos`` replace, ...),
        recorded like any other update, with no hook and no model call.

        Args:
            thread: The thread id, or LangGraph's ``config`` naming it.
            values: Channel values, as a run's input takes them.
            as_node: Not supported (deepactors has no graph nodes); must be None.
            runtime: The runtime whose thread actor applies it (default: one
                of its own, which waits for the thread's lease like any run).

        Returns:
            LangGraph's config naming the thread (``{"configurable": {...}}``).

        Raises:
            InputError: ``values`` do not fit the agent's state, or ``as_node`` was given.
            ConfigurationError: The agent has no checkpointer (and no ``runtime``).
        """
        if as_node is not None:
            raise InputError(
                f"as_node={as_node!r}: deepactors has no graph nodes to update as; "
                "an update is applied to the state as it stands"
            )
        if self.spec.checkpointer is None and runtime is None:
            # Nothing would keep the update: no checkpointer, no thread actor.
            raise ConfigurationError(
                "this agent has no checkpointer, so it saves no threads to update "
                "(pass runtime= to update a thread its runtime keeps in memory)"
            )
        await on_thread(self, thread, runtime, lambda h: h.update_state(values))
        return {"configurable": {"thread_id": thread_named(thread)}}

    def update_state(
        self,
        thread: str | Mapping[str, object],
        values: Mapping[str, object],
        as_node: str | None = None,
    ) -> dict[str, dict[str, str]]:
        """Blocking :meth:`aupdate_state`."""
        return run_sync(self.aupdate_state, thread, values, as_node, backend="asyncio")


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


def _check_kwargs(name: str, target: Callable[..., object], kwargs: Mapping[str, object]) -> None:
    """A misspelt keyword of a sync method named as the caller wrote it (not its async twin)."""
    known = inspect.signature(target).parameters
    for key in kwargs:
        if key not in known:
            raise TypeError(f"DeepAgent.{name}() got an unexpected keyword argument {key!r}")

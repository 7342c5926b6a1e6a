"""``create_deep_agent`` and the agent object it returns."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from .actors._filewatch import actor_listener
from .actors._journal import Journal, Restored, open_journal
from .actors._loop import CompiledAgent, run_loop
from .actors._runtime import RunHandle, Runtime, open_runtime
from .actors._stream import EventStream
from .actors._sync import run_sync, stream_sync
from .backends import StateBackend
from .context import RunContext
from .errors import ConfigurationError, InputError
from .events import Event, Interrupted, RunStarted
from .interrupts import ActionRequest, Interrupt, parse_decisions
from .middleware._base import AgentMiddleware
from .middleware._caching import AnthropicPromptCachingMiddleware
from .middleware._filesystem import FilesystemMiddleware
from .middleware._hitl import HumanInTheLoopMiddleware
from .middleware._patch import PatchToolCallsMiddleware
from .middleware._retry import ModelRetryMiddleware
from .middleware._subagents import (
    GENERAL_PURPOSE,
    GENERAL_PURPOSE_DESCRIPTION,
    GENERAL_PURPOSE_PROMPT,
    SubAgentMiddleware,
    SubAgentSpec,
)
from .middleware._todo import TodoListMiddleware
from .models import ChatModel, resolve_model
from .state import Channel, State, default_channels, validate_input
from .tools import Command, Tool, ToolLike, as_tools

if TYPE_CHECKING:
    from .backends import Backend
    from .persistence import Checkpointer, CheckpointRecord
    from .persistence.store import Store

__all__ = ["DeepAgent", "create_deep_agent"]

_RESUME = "__resume__"  # the input key a Command(resume=...) travels under

DEFAULT_PROMPT = (
    "You are a capable assistant that works step by step: plan longer tasks, use your "
    "tools to do the work rather than guessing, and finish with a clear answer."
)


class DeepAgent:
    """An agent made by :func:`create_deep_agent`. Run it with :meth:`ainvoke`.

    The object is immutable and shareable: any number of runs, on any number of
    threads and event loops, may use one agent at once.
    """

    def __init__(
        self,
        compiled: CompiledAgent,
        *,
        backend: Backend | None = None,
        store: Store | None = None,
        checkpointer: Checkpointer | None = None,
    ) -> None:
        self._compiled = compiled
        self.backend = backend
        self.store = store
        self.checkpointer = checkpointer
        self._turns: dict[tuple[object, str], anyio.Lock] = {}

    @property
    def name(self) -> str:
        """The agent's name, also the root of its actor paths."""
        return self._compiled.name

    @property
    def model(self) -> ChatModel:
        """The model the agent calls."""
        return self._compiled.model

    @property
    def tools(self) -> Mapping[str, Any]:
        """Every tool the model sees, by name."""
        return self._compiled.tools

    @property
    def system_prompt(self) -> str | None:
        """The full system prompt, middleware sections included."""
        return self._compiled.system_prompt

    @property
    def middleware(self) -> Sequence[AgentMiddleware]:
        """The middleware stack, outermost first."""
        return self._compiled.middleware

    # -- running -------------------------------------------------------------------

    async def ainvoke(
        self,
        input: Mapping[str, Any] | str | Command,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> dict[str, Any]:
        """Run the agent to completion and return its final state.

        Args:
            input: ``{"messages": [...], "files": {...}}``, or a plain string as one
                user message.
            thread_id: The conversation to continue. Runs on one thread queue, one
                after the other.
            timeout: Seconds for the whole run, every subagent included. Past it,
                everything the run started is cancelled and ``TimeoutError`` raised.
            context: Values hooks and tools can read as ``run.context``.
            runtime: A runtime from :func:`open_runtime` to run under; without one,
                the run opens its own task group inside the caller's task.

        Returns:
            The state: ``messages``, ``todos``, ``files``, ``structured_response``,
            and ``usage`` (tokens of this run, or ``None``).

        Raises:
            InputError: Invalid input, before any model call.
            TimeoutError: The run passed ``timeout``.
            StepLimitExceeded: The model kept calling tools past ``max_steps``.
        """
        kwargs: dict[str, Any] = {"thread_id": thread_id, "timeout": timeout, "context": context}
        if runtime is not None:
            return await runtime.ainvoke(self, input, **kwargs)
        self._prepare_input(input, thread_id)  # fail before opening anything
        async with AsyncExitStack() as stack:
            if timeout is None:
                await stack.enter_async_context(self._thread_turn(thread_id))
            else:
                # Waiting for an earlier run on the thread counts against the timeout,
                # as waiting in a thread actor's mailbox does.
                started = anyio.current_time()
                with anyio.fail_after(timeout):
                    await stack.enter_async_context(self._thread_turn(thread_id))
                kwargs["timeout"] = max(0.0, timeout - (anyio.current_time() - started))
            rt = await stack.enter_async_context(open_runtime())
            handle = await rt.start(self, input, **kwargs)
            await handle.wait()
        # Raised outside the task group, so callers get the run's own exception
        # rather than an ExceptionGroup around it.
        return await handle.result()

    def astream(
        self,
        input: Mapping[str, Any] | str | Command,
        *,
        thread_id: str | None = None,
        timeout: float | None = None,
        context: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> EventStream:
        """Run the agent and stream its events as they happen.

        Use it as ``async with agent.astream(...) as events: async for e in events``
        (the form that is safe to leave early, for example in a server whose
        client went away), or directly as ``async for e in agent.astream(...)``
        when you read to the end. ``stream.result`` holds the final state after.

        Raises:
            InputError: Invalid input (when the stream is entered).
        """
        kwargs: dict[str, Any] = {"thread_id": thread_id, "timeout": timeout, "context": context}

        async def start(rt: Runtime) -> RunHandle:
            return await rt.start(self, input, stream=True, **kwargs)

        turn = None if runtime is not None else self._thread_turn(thread_id)
        return EventStream(start, runtime=runtime, turn=turn)

    def invoke(
        self,
        input: Mapping[str, Any] | str | Command,
        *,
        backend: str = "asyncio",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Blocking :meth:`ainvoke`, on a fresh event loop of ``backend``.

        Works in a plain script and also from a thread whose event loop is already
        running (a notebook cell): the run then gets a loop in a worker thread.
        """

        async def invoke_and_close() -> dict[str, Any]:
            try:
                return await self.ainvoke(input, **kwargs)
            finally:
                await self._close_models()

        return run_sync(invoke_and_close, backend=backend)

    def stream(
        self,
        input: Mapping[str, Any] | str | Command,
        *,
        backend: str = "asyncio",
        **kwargs: Any,
    ) -> Iterator[Event]:
        """Blocking :meth:`astream`: yields events as the run produces them."""

        @asynccontextmanager
        async def events_then_close() -> AsyncIterator[EventStream]:
            try:
                async with self.astream(input, **kwargs) as events:
                    yield events
            finally:
                await self._close_models()

        return stream_sync(events_then_close, backend=backend)

    @asynccontextmanager
    async def _thread_turn(self, thread_id: str | None) -> AsyncIterator[None]:
        """Runs on one thread take turns, in arrival order, even without a runtime.

        Inside :func:`open_runtime` the thread's actor queues them in its mailbox;
        a run without a runtime has an actor of its own, so runs of this agent on
        the same thread in the same event loop wait here for the one before.
        """
        if thread_id is None:
            yield
            return
        key = (anyio.lowlevel.current_token(), thread_id)
        lock = self._turns.get(key)
        if lock is None:
            lock = self._turns[key] = anyio.Lock()
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._turns.pop(key, None)

    def _models(self) -> set[ChatModel]:
        """This agent's model and its subagents' (recursively)."""
        seen: set[ChatModel] = {self.model}
        for mw in self.middleware:
            if isinstance(mw, SubAgentMiddleware):
                for spec in mw.specs.values():
                    if spec.agent is not self:
                        seen |= spec.agent._models()
        return seen

    async def _close_models(self) -> None:
        # The sync API runs each call on a fresh event loop; a model's HTTP client
        # belongs to the loop that made it, so close it before that loop ends.
        for model in self._models():
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()

    # -- saved threads -------------------------------------------------------------------

    async def ahistory(self, thread_id: str) -> list[CheckpointRecord]:
        """Every checkpoint record of a thread, oldest first (every actor of its tree).

        Each record has ``seq`` (its position), ``path`` (the actor), ``step`` (that
        actor's model calls so far), ``kind`` (``update``, ``tool_result``,
        ``interrupt``, ``resume``) and ``created_at``.

        Raises:
            ConfigurationError: The agent has no checkpointer.
        """
        return await self._saver().read(thread_id)

    async def aget_state(
        self, thread_id: str, *, upto_seq: int | None = None, path: str | None = None
    ) -> dict[str, Any]:
        """A thread's state as saved, now or as it was at record ``upto_seq``.

        Args:
            thread_id: The thread.
            upto_seq: Rebuild from the records up to this one (see :meth:`ahistory`).
            path: Another actor of the tree (a subagent, ``main/task-2:researcher``).

        Raises:
            ConfigurationError: The agent has no checkpointer.
            CheckpointCorrupt: A record cannot be read; the error names the thread.
        """
        records = await self._saver().read(thread_id, upto_seq=upto_seq)
        state = State(self._compiled.channels)
        Restored(thread_id, records).replay(path or self.name, state)
        return state.to_dict()

    def _saver(self) -> Checkpointer:
        if self.checkpointer is None:
            raise ConfigurationError("this agent has no checkpointer, so it saves no threads")
        return self.checkpointer

    # -- what the runtime calls ----------------------------------------------------------

    def _prepare_input(self, input: Any, thread_id: str | None) -> dict[str, Any]:
        if self.checkpointer is not None and thread_id is None:
            raise InputError(
                "this agent has a checkpointer: pass thread_id= to say which thread to save"
            )
        if input is None:
            if self.checkpointer is None or thread_id is None:
                raise InputError(
                    "input=None continues a saved thread; it needs a checkpointer and a thread_id"
                )
            return {}
        if isinstance(input, Command):
            if input.resume is None:
                raise InputError("as a run's input, a Command needs resume=[decisions]")
            if self.checkpointer is None:
                raise InputError(
                    "Command(resume=...) continues an interrupted thread; this agent has no "
                    "checkpointer to continue it from"
                )
            return {_RESUME: input.resume}
        return validate_input(self._compiled.channels, input)

    async def _run_order(
        self,
        state: State | None,
        values: Mapping[str, Any],
        handle: RunHandle,
        options: Mapping[str, Any],
        emit_stream: MemoryObjectSendStream[Event] | None,
    ) -> tuple[dict[str, Any], State]:
        """One run of this agent on a thread actor's state (None: a new actor)."""
        fresh = state is None
        if state is None:
            state = State(self._compiled.channels)
        run = self._run_context(state, handle, options, emit_stream)
        values = dict(values)
        resume = values.pop(_RESUME, None)
        failure: Exception | None = None
        interrupted: list[ActionRequest] = []
        async with AsyncExitStack() as stack:
            try:
                if self.checkpointer is not None:
                    journal = await stack.enter_async_context(
                        open_journal(
                            self.checkpointer,
                            run.thread_id or "",
                            restore=fresh or resume is not None,
                        )
                    )
                    _resume_from(journal, run, state, fresh=fresh, resume=resume)
                interrupted = await self._execute(state, values, run)
            except Exception as exc:
                # Raised outside the journal's task group below, so the caller gets
                # this exception itself, not an ExceptionGroup around it.
                failure = exc
        if failure is not None:
            raise failure
        result = state.to_dict()
        result["usage"] = run.usage
        if interrupted:
            result["__interrupt__"] = [r.to_dict() for r in interrupted]
        return result, state

    def _run_context(
        self,
        state: State,
        handle: RunHandle,
        options: Mapping[str, Any],
        emit_stream: MemoryObjectSendStream[Event] | None,
    ) -> RunContext:
        compiled = self._compiled
        bind = getattr(self.backend, "bind", None)
        run = RunContext(
            path=compiled.name,
            run_id=handle.run_id,
            thread_id=handle.thread_id,
            agent_name=compiled.name,
            backend=bind(state, name=compiled.name) if bind is not None else self.backend,
            store=self.store,
            emit=emit_stream.send_nowait if emit_stream is not None else None,
            context=options.get("context") or {},
        )
        return run

    async def _execute(
        self, state: State, values: Mapping[str, Any], run: RunContext
    ) -> list[ActionRequest]:
        """Apply the input and run the loop; return the requests it stopped for, if any."""
        emit = run.emit
        if emit is not None:
            emit(RunStarted(path=run.path, run_id=run.run_id, thread_id=run.thread_id))
        state.listener = actor_listener(run, state)
        try:
            if values:
                state.apply(values)
            await run_loop(self._compiled, state, run)
        except Interrupt as exc:
            requests = [r.to_dict() for r in exc.requests]
            if run.journal is not None:
                run.journal.record(run.path, run.step, "interrupt", {"requests": requests})
            if emit is not None:
                emit(Interrupted(path=run.path, run_id=run.run_id, requests=requests))
            return exc.requests
        finally:
            state.listener = None
        return []


def _resume_from(
    journal: Journal, run: RunContext, state: State, *, fresh: bool, resume: Any
) -> None:
    """Attach the journal to the run; restore the state and the pending decisions."""
    run.journal = journal
    restored = journal.restored
    if restored is not None and fresh:
        # A new actor for a thread with a past: rebuild its state first (before
        # any listener, so nothing is recorded twice).
        run.services["resumed_results"] = restored.replay(run.path, state)
    if resume is None:
        return
    pending = restored.pending_interrupt(run.path) if restored else None
    if not pending:
        raise InputError(f"thread {run.thread_id!r} is not waiting for any decision")
    decisions = parse_decisions(resume, pending)
    run.services["resume_decisions"] = decisions
    journal.record(run.path, run.step, "resume", {"ids": sorted(decisions)})


SubAgentLike = Mapping[str, Any] | SubAgentSpec


def create_deep_agent(
    model: str | ChatModel | None = None,
    tools: Sequence[ToolLike] | None = None,
    *,
    system_prompt: str | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    subagents: Sequence[SubAgentLike] | None = None,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    backend: Backend | None = None,
    checkpointer: Checkpointer | None = None,
    store: Store | None = None,
    interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
    response_format: Any = None,
    debug: bool = False,
    name: str | None = None,
    max_steps: int = 1000,
    max_concurrent_subagents: int | None = None,
    max_concurrent_subagents_total: int | None = None,
) -> DeepAgent:
    """Build a deep agent: a model, tools, and the default middleware stack.

    The parameters follow LangChain's ``deepagents`` so a script ports by changing
    imports. The default stack, outermost first: ``TodoListMiddleware`` (planning),
    ``FilesystemMiddleware`` (file tools over ``backend``, ``execute`` when the
    backend can run commands), ``SubAgentMiddleware`` (the ``task`` tool),
    ``PatchToolCallsMiddleware``
    (repairs interrupted histories), then ``middleware``. A middleware of yours with
    the same ``name`` as a default one replaces it in place.

    Args:
        model: ``"anthropic:<model id>"`` or a :class:`~deepactors.models.ChatModel`.
        tools: Functions (sync or async, with type hints) or :class:`Tool` objects.
        system_prompt: Your instructions; middleware sections are appended.
        middleware: Extra middleware, after the default stack.
        subagents: What ``task`` can start besides ``general-purpose``: dicts with
            ``name``, ``description``, ``system_prompt`` and optionally ``tools``,
            ``model``, ``middleware``, ``timeout`` (seconds); or a prebuilt agent as
            ``{"name", "description", "agent": <DeepAgent>}``. A dict named
            ``general-purpose`` replaces the built-in one.
        backend: Where the file tools keep files (default: in agent state).
        store: Long-term key-value store for backends and memory.
        debug: Log every hook and model call through structlog.
        name: The agent's name and the root of its actor paths (default ``main``).
        max_steps: Model calls allowed per run before ``StepLimitExceeded``.
        max_concurrent_subagents: Subagents one run may have working at once.
        max_concurrent_subagents_total: Subagents the whole tree may have working
            at once.

    Raises:
        ConfigurationError: A bad argument, or one whose feature is not available.
    """
    for param, value in (
        ("skills", skills),
        ("memory", memory),
        ("response_format", response_format),
    ):
        if value:
            raise ConfigurationError(f"{param}= is not available in this version of deepactors")
    if interrupt_on and checkpointer is None:
        raise ConfigurationError(
            "interrupt_on needs a checkpointer: an interrupted run is continued from its "
            "saved thread (for example checkpointer=MemoryCheckpointer())"
        )
    # The tail runs innermost: a retry repeats only the model call, and the human
    # decides on the exact call that would run.
    tail: list[AgentMiddleware] = [ModelRetryMiddleware()]
    if interrupt_on:
        tail.append(HumanInTheLoopMiddleware(interrupt_on))
    models = _ModelCache()
    resolved = models.resolve(model)
    user_tools = as_tools(tools)
    backend = backend if backend is not None else StateBackend()
    specs = _subagent_specs(
        subagents or (),
        model=resolved,
        tools=user_tools,
        backend=backend,
        store=store,
        debug=debug,
        max_steps=max_steps,
        tail=tail,
        models=models,
    )
    defaults: list[AgentMiddleware] = [
        TodoListMiddleware(),
        FilesystemMiddleware(execute=_can_execute(backend)),
        SubAgentMiddleware(
            specs,
            max_concurrent=max_concurrent_subagents,
            max_concurrent_total=max_concurrent_subagents_total,
        ),
        AnthropicPromptCachingMiddleware(),
        PatchToolCallsMiddleware(),
    ]
    return _build_agent(
        model=resolved,
        tools=user_tools,
        system_prompt=system_prompt,
        stack=[*_merge_middleware(defaults, middleware), *tail],
        backend=backend,
        store=store,
        debug=debug,
        name=name,
        max_steps=max_steps,
        checkpointer=checkpointer,
    )


def _build_agent(
    *,
    model: ChatModel,
    tools: Sequence[Tool],
    system_prompt: str | None,
    stack: Sequence[AgentMiddleware],
    backend: Backend | None,
    store: Store | None,
    debug: bool,
    name: str | None,
    max_steps: int,
    checkpointer: Checkpointer | None = None,
) -> DeepAgent:
    if not getattr(model, "prompt_caching", False):
        # Cache hints are for Claude; for any other model the layer would only
        # copy each request, on the hot path, for nothing.
        stack = [mw for mw in stack if type(mw) is not AnthropicPromptCachingMiddleware]
    agent_name = name or "main"
    if "/" in agent_name or not agent_name:
        raise ConfigurationError(f"agent name {agent_name!r} must be non-empty and contain no '/'")
    all_tools = {t.name: t for t in tools}
    channels: dict[str, Channel] = default_channels()
    prompt_parts = [system_prompt or DEFAULT_PROMPT]
    for mw in stack:
        for t in mw.tools:
            if t.name in all_tools:
                raise ConfigurationError(
                    f"tool {t.name!r} of {mw.name} clashes with another tool of that name"
                )
            all_tools[t.name] = t
        for key, ch in mw.channels.items():
            channels.setdefault(key, ch)
        if mw.system_prompt:
            prompt_parts.append(mw.system_prompt)
    compiled = CompiledAgent(
        name=agent_name,
        model=model,
        tools=all_tools,
        system_prompt="\n\n".join(prompt_parts),
        middleware=list(stack),
        channels=channels,
        max_steps=max_steps,
        debug=debug,
    )
    return DeepAgent(compiled, backend=backend, store=store, checkpointer=checkpointer)


_SUBAGENT_KEYS = frozenset(
    {"name", "description", "system_prompt", "tools", "model", "middleware", "timeout", "agent"}
)


def _subagent_specs(
    items: Sequence[SubAgentLike],
    *,
    model: ChatModel,
    tools: Sequence[Tool],
    backend: Backend,
    store: Store | None,
    debug: bool,
    max_steps: int,
    tail: Sequence[AgentMiddleware] = (),
    models: _ModelCache | None = None,
) -> list[SubAgentSpec]:
    """Subagent specs from the user's dicts, plus ``general-purpose`` unless replaced."""

    def child(
        child_name: str,
        prompt: str,
        child_model: str | ChatModel | None,
        child_tools: Sequence[ToolLike] | None,
        extra: Sequence[AgentMiddleware],
    ) -> DeepAgent:
        # Declarative subagents get the default stack minus `task`: one level of
        # delegation, as in deepagents. A prebuilt agent may bring its own.
        defaults = [
            TodoListMiddleware(),
            FilesystemMiddleware(execute=_can_execute(backend)),
            AnthropicPromptCachingMiddleware(),
            PatchToolCallsMiddleware(),
        ]
        # Declarative subagents inherit interrupt_on: a guarded tool stays guarded
        # when the work is delegated.
        stack = [*_merge_middleware(defaults, extra), *tail]
        return _build_agent(
            model=model if child_model is None else (models or _ModelCache()).resolve(child_model),
            tools=tools if child_tools is None else as_tools(child_tools),
            system_prompt=prompt,
            stack=stack,
            backend=backend,
            store=store,
            debug=debug,
            name=child_name,
            max_steps=max_steps,
        )

    specs: list[SubAgentSpec] = []
    for item in items:
        if isinstance(item, SubAgentSpec):
            specs.append(item)
            continue
        if not isinstance(item, Mapping):
            raise ConfigurationError(f"a subagent must be a dict, not {type(item).__name__}")
        unknown = set(item) - _SUBAGENT_KEYS
        if unknown:
            raise ConfigurationError(
                f"unknown subagent key(s) {sorted(unknown)}; known: {sorted(_SUBAGENT_KEYS)}"
            )
        for key in ("name", "description"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise ConfigurationError(f"every subagent needs a non-empty {key!r}")
        timeout = item.get("timeout")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise ConfigurationError(f"subagent {item['name']!r}: timeout must be > 0 seconds")
        prebuilt = item.get("agent")
        if prebuilt is not None:
            if not isinstance(prebuilt, DeepAgent):
                raise ConfigurationError(f"subagent {item['name']!r}: 'agent' must be a DeepAgent")
            agent = prebuilt
        else:
            if not isinstance(item.get("system_prompt"), str):
                raise ConfigurationError(f"subagent {item['name']!r} needs a 'system_prompt'")
            agent = child(
                item["name"],
                item["system_prompt"],
                item.get("model"),
                item.get("tools"),
                item.get("middleware", ()),
            )
        specs.append(
            SubAgentSpec(
                name=item["name"], description=item["description"], agent=agent, timeout=timeout
            )
        )
    if not any(s.name == GENERAL_PURPOSE for s in specs):
        gp = child(GENERAL_PURPOSE, GENERAL_PURPOSE_PROMPT, None, None, ())
        specs.insert(
            0, SubAgentSpec(name=GENERAL_PURPOSE, description=GENERAL_PURPOSE_DESCRIPTION, agent=gp)
        )
    return specs


class _ModelCache:
    """Resolves model strings once per agent tree.

    A subagent naming the same ``"anthropic:..."`` string as its parent gets the
    same model object, so they share its client and its request limiter.
    """

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}

    def resolve(self, model: str | ChatModel | None) -> ChatModel:
        if model is not None and not isinstance(model, str):
            return resolve_model(model)
        key = model or ""
        if key not in self._models:
            self._models[key] = resolve_model(model)
        return self._models[key]


def _can_execute(backend: Backend | None) -> bool:
    return bool(getattr(backend, "can_execute", False))


def _merge_middleware(
    defaults: list[AgentMiddleware], extra: Sequence[AgentMiddleware]
) -> list[AgentMiddleware]:
    stack = list(defaults)
    names = [mw.name for mw in stack]
    for mw in extra:
        if not isinstance(mw, AgentMiddleware):
            raise ConfigurationError(f"not a middleware: {mw!r} (subclass AgentMiddleware)")
        if mw.name in names:
            stack[names.index(mw.name)] = mw
        else:
            stack.append(mw)
            names.append(mw.name)
    return stack

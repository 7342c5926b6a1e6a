"""What hooks and tools can see of the run they are part of."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.from_thread

from .events import CustomEvent, Event
from .messages import Usage

if TYPE_CHECKING:
    from .actors._journal import Journal
    from .backends import Backend
    from .persistence.store import Store
    from .state import State

__all__ = ["RunContext", "ToolRuntime"]


@dataclass(slots=True, kw_only=True)
class RunContext:
    """The context of one actor's run, handed to every hook.

    Attributes:
        path: The actor path (``main``, ``main/task-3:researcher``).
        run_id: Unique id of this run.
        thread_id: The conversation thread, if the run has one.
        agent_name: The agent's ``name``.
        depth: 0 for the top-level agent, +1 per subagent level.
        backend: The file backend, bound to this actor's state.
        store: The long-term store, if the agent has one.
        emit: Sends an event to the run's listeners; ``None`` when nobody listens,
            so callers test it before building an event.
        context: Free-form values the caller passed with ``context=``.
        services: Middleware-private per-run objects, keyed by middleware name.
        parent: The run of the parent actor, for a subagent.
        usage: Tokens spent by this run and every subagent under it, so far.
        step: Model calls this run has made so far.
        journal: Where the run's changes are checkpointed, if anywhere.
    """

    path: str
    run_id: str
    thread_id: str | None = None
    agent_name: str = "main"
    depth: int = 0
    backend: Backend | None = None
    store: Store | None = None
    emit: Callable[[Event], None] | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    services: dict[str, Any] = field(default_factory=dict)
    parent: RunContext | None = None
    usage: Usage | None = None
    step: int = 0
    journal: Journal | None = None
    loop_thread: int = field(default_factory=threading.get_ident)

    @property
    def root(self) -> RunContext:
        """The top-level run of this actor tree."""
        run = self
        while run.parent is not None:
            run = run.parent
        return run

    def add_usage(self, usage: Usage | None) -> None:
        """Count tokens spent by this run or a subagent under it."""
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage


@dataclass(slots=True, kw_only=True)
class ToolRuntime:
    """What a tool that asks for it (a parameter annotated ``ToolRuntime``) receives.

    Attributes:
        state: The calling actor's state, read-only by convention: return
            ``Command(update=...)`` to change it.
        tool_call_id: The id of the call being answered.
        run: The run's context (path, backend, store, ...).
    """

    state: State
    tool_call_id: str
    run: RunContext

    @property
    def path(self) -> str:
        """The actor path of the agent calling the tool."""
        return self.run.path

    @property
    def backend(self) -> Backend | None:
        """The agent's file backend, bound to its state."""
        return self.run.backend

    @property
    def store(self) -> Store | None:
        """The agent's long-term store, if any."""
        return self.run.store

    def write(self, data: Any) -> None:
        """Stream ``data`` to the run's listeners as a :class:`CustomEvent`.

        Does nothing when nobody listens. Safe to call from a sync tool's thread.
        """
        emit = self.run.emit
        if emit is None:
            return
        event = CustomEvent(path=self.run.path, run_id=self.run.run_id, data=data)
        if threading.get_ident() == self.run.loop_thread:
            emit(event)
        else:
            # Sync tools run in worker threads; the event stream is not thread-safe,
            # so hand the event to the loop's thread.
            anyio.from_thread.run_sync(emit, event)

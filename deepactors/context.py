"""What hooks and tools can see of the run they are part of.

:class:`RunContext` is one actor's run; :class:`TreeContext` is what a whole
actor tree shares (the top-level run owns it, every subagent run points at the
same one). Both are plain typed records: the runtime fills their fields, and
middleware keep per-run objects of their own under typed keys
(:class:`RunKey`), in the spirit of anyio's typed attributes, instead of string
keys into a shared dict.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, final

import anyio
import anyio.from_thread
from typing_extensions import TypeVar

from ._core.jsonvalue import JSONObject
from ._core.pacing import Pacer
from .events import CustomEvent, Event
from .interrupts import ActionRequest, Decision
from .messages import ToolMessage, Usage

if TYPE_CHECKING:
    from .backends import Backend
    from .budget import BudgetLedger
    from .persistence import Store
    from .state import Applied, State

__all__ = [
    "ContextT",
    "Inbox",
    "RunContext",
    "RunJournal",
    "RunKey",
    "ThreadRecords",
    "ToolResult",
    "ToolRuntime",
    "TreeContext",
    "TreeSlot",
]

T = TypeVar("T")
ValueT = TypeVar("ValueT", covariant=True)  # a key to a _RunView is a key to what it offers

ToolResult = tuple[ToolMessage, dict[str, Any] | None]
"""A finished tool call: the result message and the state update it asked for."""


class RunJournal(Protocol):
    """Where an actor tree's state changes are checkpointed (see ``actors._journal``)."""

    def record(self, path: str, step: int, kind: str, data: JSONObject) -> int:
        """Queue a record of the actor at ``path``; return a ticket."""
        ...

    def record_tool_result(
        self,
        path: str,
        step: int,
        message: ToolMessage,
        update: Mapping[str, object] | None,
        state: State,
    ) -> None:
        """Record a finished tool call, so a resumed step does not run it again."""
        ...

    def listener(
        self, path: str, state: State, step: Callable[[], int]
    ) -> Callable[[Applied], None]:
        """A state listener recording every update the actor at ``path`` applies."""
        ...

    async def sync(self) -> None:
        """Wait until everything recorded so far is stored."""
        ...


class ThreadRecords(Protocol):
    """A thread's saved records, as the actors resuming from them read them."""

    def has(self, path: str) -> bool:
        """Whether the actor at ``path`` left anything to resume from."""
        ...

    def pending_interrupt(self, path: str) -> list[ActionRequest] | None:
        """The requests the actor at ``path`` stopped for, unless already answered."""
        ...

    def pending_breakpoint(self, path: str) -> tuple[str | None, str | None] | None:
        """Where the actor stopped at a breakpoint (the node before, the node next), if so."""
        ...

    def replay(self, path: str, state: State) -> dict[str, ToolResult]:
        """Rebuild the actor's state; return the results of its unfinished step."""
        ...


@final
class RunKey(Generic[ValueT]):
    """A typed key for a per-run object of a middleware: ``run.local(KEY)``.

    Args:
        name: Shown in reprs and errors.
        factory: Makes the value the first time a run asks for it.
    """

    __slots__ = ("factory", "name")

    def __init__(self, name: str, factory: Callable[[], ValueT]) -> None:
        self.name = name
        self.factory = factory

    def __repr__(self) -> str:
        return f"RunKey({self.name!r})"


@final
class Inbox:
    """Messages for a running actor from outside its run (``update_async_task``).

    The actor reads them at its next turn, before it asks its model anything,
    as user messages. Whoever holds the inbox sends; the actor alone reads.
    """

    __slots__ = ("_arrived", "_pending")

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._arrived = anyio.Event()

    @property
    def pending(self) -> bool:
        """Whether messages wait to be read."""
        return bool(self._pending)

    def put(self, text: str) -> None:
        """Leave a message for the actor's next turn."""
        self._pending.append(text)
        self._arrived.set()

    def take(self) -> list[str]:
        """The messages that arrived since the last take, oldest first."""
        taken, self._pending = self._pending, []
        self._arrived = anyio.Event()
        return taken

    async def wait(self) -> None:
        """Wait until a message is pending."""
        if not self._pending:
            await self._arrived.wait()


@final
class TreeSlot:
    """A child's slot under the tree-wide fan-out cap.

    A subagent waiting on its own subagents lends its slot back meanwhile:
    otherwise a cap smaller than the tree's depth would deadlock (every slot
    held by a parent waiting for a child that waits for a slot).
    """

    __slots__ = ("held", "lent", "limiter")

    def __init__(self, limiter: anyio.Semaphore) -> None:
        self.limiter = limiter
        self.held = False
        self.lent = 0

    async def acquire(self) -> None:
        """Wait for a slot."""
        await self.limiter.acquire()
        self.held = True

    def release(self) -> None:
        """Give the slot back (no-op if not held)."""
        if self.held:
            self.held = False
            self.limiter.release()

    def lend(self) -> None:
        """Lend the slot while this actor waits for its own children."""
        self.lent += 1
        if self.lent == 1:
            self.release()

    async def reclaim(self) -> None:
        """Take the slot back once the last child this actor waited for is done."""
        self.lent -= 1
        if self.lent == 0 and not self.held:
            await self.acquire()


@final
@dataclass(slots=True, kw_only=True, eq=False)
class TreeContext:
    """What every actor of one run's tree shares; owned by the top-level run.

    Attributes:
        thread_id: The conversation thread, if the run has one.
        decisions: Human decisions the run was resumed with, by tool call id.
        awaiting: The requests the thread still waits for a human on, by tool call
            id, when the run continues it without deciding them (``input=None``):
            such a call never runs, whichever agent continues the thread; it stops
            the run again.
        journal: Where the tree's changes are checkpointed, if anywhere.
        restored: The thread's saved records, when the run resumes from them.
        subagent_limiter: The tree-wide cap on subagents working at once.
        max_steps: Model calls allowed to each agent of the tree, when the caller
            set a limit for this run (``recursion_limit``); else each agent's own.
        budget: The ledger of the run's budget, shared by the whole tree (see
            :mod:`deepactors.budget`), if the run has one.
        pacer: Keeps the tree's steps from holding the event loop for long at a
            time (see :mod:`deepactors._core.pacing`); None when nothing paces.
        identity: Who the run acts for: the server's authenticated caller
            (a :class:`deepactors.server.auth.Identity`), None when no one
            authenticated.
        background: The thread actor's background subagents (a
            ``deepactors.actors._background.BackgroundTasks``), None outside
            an actor or when no agent of the tree can start any (see
            ``AgentMiddleware.starts_background``).
        keeps_background: Whether the thread actor outlives this run, so
            background subagents may keep working after it ends.
        stateless: The run's thread is thrown away when it ends (a server's
            stateless run): a stop for a human's decision is an error then.
    """

    thread_id: str | None = None
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    awaiting: Mapping[str, ActionRequest] = field(default_factory=dict)
    journal: RunJournal | None = None
    restored: ThreadRecords | None = None
    subagent_limiter: anyio.Semaphore | None = None
    max_steps: int | None = None
    budget: BudgetLedger | None = None
    pacer: Pacer | None = None
    identity: Any = None
    background: object = None
    keeps_background: bool = False
    stateless: bool = False


ContextT = TypeVar("ContextT", default=Any)
"""The type of a run's ``context`` (the agent's ``context_schema``); Any unless given."""


def _no_context() -> Any:
    return {}


@final
@dataclass(slots=True, kw_only=True, eq=False)
class RunContext(Generic[ContextT]):
    """The context of one actor's run, handed to every hook.

    ``RunContext[MyContext]`` types ``run.context`` for an agent made with
    ``context_schema=MyContext``; a bare ``RunContext`` reads it as ``Any``.

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
        context: What the caller passed with ``context=``: an instance of the
            agent's ``context_schema`` when it has one, else a mapping.
        parent: The run of the parent actor, for a subagent.
        tree: What the whole actor tree shares (the same object in every run of it).
        tool_names: The names of the tools the agent has.
        resumed: Results of tool calls that finished before the run stopped
            (a crash or an interrupt), by call id: they are not run again.
        slot: This actor's slot under the tree-wide subagent cap, if any.
        usage: Tokens spent by this run and every subagent under it, so far.
        step: Model calls this run has made so far.
        loop_thread: The OS thread of the event loop the run is on.
        budget: The budget ledger this run's calls draw from: the tree's, or a
            subagent's own one inside it; ``None`` when nothing is budgeted.
        system_prompt: The agent's system prompt (as its spec builds it), so a
            forked subagent can start from it.
        inbox: Messages sent to this actor while it runs (a background
            subagent's), read as user messages before each model call; None
            when nothing can reach it.
    """

    path: str
    run_id: str
    thread_id: str | None = None
    agent_name: str = "main"
    depth: int = 0
    backend: Backend | None = None
    store: Store | None = None
    emit: Callable[[Event], None] | None = None
    context: ContextT = field(default_factory=_no_context)
    parent: RunContext | None = None
    tree: TreeContext = field(default_factory=TreeContext)
    tool_names: Collection[str] = ()
    resumed: dict[str, ToolResult] | None = None
    slot: TreeSlot | None = None
    usage: Usage | None = None
    step: int = 0
    loop_thread: int = field(default_factory=threading.get_ident)
    budget: BudgetLedger | None = None
    system_prompt: str | None = None
    inbox: Inbox | None = None
    _locals: dict[RunKey[Any], Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def journal(self) -> RunJournal | None:
        """Where the run's changes are checkpointed, if anywhere."""
        return self.tree.journal

    @property
    def identity(self) -> Any:
        """Who the run acts for (the server's authenticated caller), or None."""
        return self.tree.identity

    @property
    def root(self) -> RunContext:
        """The top-level run of this actor tree."""
        run = self
        while run.parent is not None:
            run = run.parent
        return run

    def local(self, key: RunKey[T]) -> T:
        """This run's value for ``key``, made by ``key.factory`` on first use.

        Per run of one actor: a subagent's run has its own values.
        """
        try:
            found: T = self._locals[key]
            return found
        except KeyError:
            value = self._locals[key] = key.factory()
            return value

    def add_usage(self, usage: Usage | None) -> None:
        """Count tokens spent by this run or a subagent under it."""
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage


@final
@dataclass(slots=True, kw_only=True)
class ToolRuntime:
    """What a tool that asks for it (a parameter annotated ``ToolRuntime``) receives.

    Attributes:
        state: The calling actor's state, read-only by convention: return
            ``Command(update=...)`` to change it.
        tool_call_id: The id of the call being answered. Stable across a resume:
            a call that is run again after a crash has the same id, so a tool can
            use it as an idempotency key for effects outside the agent.
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
    def identity(self) -> Any:
        """Who the run acts for (the server's authenticated caller), or None."""
        return self.run.tree.identity

    @property
    def backend(self) -> Backend | None:
        """The agent's file backend, bound to its state."""
        return self.run.backend

    @property
    def store(self) -> Store | None:
        """The agent's long-term store, if any."""
        return self.run.store

    @property
    def context(self) -> Any:
        """What the caller passed with ``context=`` (an instance of ``context_schema``)."""
        return self.run.context

    def write(self, data: object) -> None:
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

"""Saved threads, as callers read them: state snapshots and history.

:class:`ThreadState` is a thread's state read back from its checkpointer: a
mapping of channel values (``state["messages"]``), and also LangGraph's
``StateSnapshot`` shape (``.values``, ``.next``, ``.tasks``, ``.config``) so
scripts ported from deepagents read it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, final

from ..errors import ConfigurationError
from ..interrupts import PendingRequest, interrupt_view
from ..messages import AssistantMessage, Message, ToolMessage
from ..persistence import Checkpointer
from ..state import State
from ._loop import unanswered_calls
from ._restored import Restored
from ._spec import AgentSpec

__all__ = [
    "ThreadState",
    "ThreadTask",
    "ThreadView",
    "last_turn",
    "next_step",
    "saved_state",
    "saver",
]

T = TypeVar("T")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadTask:
    """What a thread waits for (LangGraph's ``PregelTask`` shape).

    Attributes:
        name: The node that waits: ``"tools"`` when tool calls wait for human
            decisions; the node a breakpoint stopped before (``"model"`` or
            ``"tools"``), with no request.
        interrupts: The pending requests (each with ``.id`` and ``.value``).
    """

    name: str
    interrupts: tuple[PendingRequest, ...] = ()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadState:
    """A thread's saved state: channel values by name, plus where the thread stands.

    Read a channel as ``state["messages"]`` (as from a run's result) or through
    ``state.values`` (LangGraph's ``StateSnapshot``).

    Attributes:
        values: Every channel's value (``messages``, ``todos``, ``files``, ...).
        next: What runs next if the thread is continued: ``("model",)``,
            ``("tools",)``, or ``()`` when the thread finished (its model's last
            answer made no calls, or its pending calls were ended: goto END).
        tasks: What the thread waits for (interrupts), if anything.
        interrupts: The pending requests, as under ``result["__interrupt__"]``.
        stopped: The thread's last run stopped at a breakpoint
            (``interrupt_before``/``interrupt_after``) and no run went on since.
        config: ``{"configurable": {"thread_id": ...}}``, as LangGraph gives it.
        seq: The newest checkpoint record this state was rebuilt from (None:
            none; records a rollback took back do not count).
    """

    values: Mapping[str, Any]
    next: tuple[str, ...] = ()
    tasks: tuple[ThreadTask, ...] = ()
    interrupts: tuple[PendingRequest, ...] = ()
    stopped: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    seq: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def get(self, key: str, default: Any = None) -> Any:
        """A channel's value, or ``default``."""
        return self.values.get(key, default)

    def keys(self) -> KeysView[str]:
        """The channel names."""
        return self.values.keys()

    def items(self) -> ItemsView[str, Any]:
        """``(channel, value)`` pairs."""
        return self.values.items()


class ThreadView:
    """A thread's state as a read found it, and what callers rendered of it.

    Kept by the thread's actor until the thread changes (see
    ``ThreadHandle.view``): one rendering per caller's ``render`` per head.
    """

    __slots__ = ("_renders", "state")

    def __init__(self, state: ThreadState) -> None:
        self.state = state
        self._renders: dict[Callable[[ThreadState], object], object] = {}

    def rendered(self, render: Callable[[ThreadState], T]) -> T:
        """``render(self.state)``, made once."""
        if render in self._renders:
            return cast(T, self._renders[render])
        made = self._renders[render] = render(self.state)
        return made


def last_turn(messages: Sequence[Message]) -> str | None:
    """The id of the newest message that is not a tool result (None: there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if not isinstance(messages[i], ToolMessage):
            return messages[i].id
    return None


def next_step(messages: Sequence[Message], ended_turn: str | None = None) -> tuple[str, ...]:
    """What a continued thread would do first, judged from its history.

    Args:
        messages: The thread's messages.
        ended_turn: The turn whose pending calls were ended (goto END), if any
            (``Restored.ended_turn``): while only tool results follow it, the
            thread finished there, as LangGraph's does after a run that ended.
    """
    if not messages:
        return ()
    if unanswered_calls(messages)[1]:
        return ("tools",)
    if isinstance(messages[-1], AssistantMessage):
        return ()
    if ended_turn is not None and ended_turn == last_turn(messages):
        return ()
    return ("model",)


async def saved_state(
    spec: AgentSpec, thread_id: str, *, upto_seq: int | None = None, path: str | None = None
) -> ThreadState:
    """A thread's state as its checkpointer holds it (see ``DeepAgent.aget_state``).

    Raises:
        ConfigurationError: The agent has no checkpointer.
        CheckpointCorrupt: A record cannot be read; the error names the thread.
    """
    checkpointer = saver(spec)
    records = await checkpointer.read(thread_id, upto_seq=upto_seq)
    state = State(spec.channels)
    # The source names the database in errors, as a resuming run's do.
    restored = Restored(thread_id, records, source=checkpointer.location)
    actor = path or spec.name
    restored.replay(actor, state)
    pending = restored.pending_interrupt(actor) or []
    interrupts = tuple(interrupt_view([r.to_dict() for r in pending]))
    next = next_step(state.messages, restored.ended_turn(actor))
    stopped = restored.pending_breakpoint(actor) is not None
    tasks: tuple[ThreadTask, ...] = ()
    if interrupts:
        tasks = (ThreadTask(name="tools", interrupts=interrupts),)
    elif stopped and next:
        # As LangGraph's at a static breakpoint: the node it stopped before, no interrupt.
        tasks = (ThreadTask(name=next[0]),)
    return ThreadState(
        values=state.to_dict(),
        next=next,
        tasks=tasks,
        interrupts=interrupts,
        stopped=stopped,
        config={"configurable": {"thread_id": thread_id}},
        # The newest record that counts: after a rollback, the one it went back to.
        seq=restored.records[-1].seq if restored.records else None,
    )


def saver(spec: AgentSpec) -> Checkpointer:
    """The agent's checkpointer: where its threads are saved.

    Raises:
        ConfigurationError: It has none.
    """
    if spec.checkpointer is None:
        raise ConfigurationError(f"agent {spec.name!r} has no checkpointer, so it saves no threads")
    return spec.checkpointer

"""The saved-threads half of the agent facade: state snapshots, history, updates.

Every call goes through the thread's handle (:meth:`Runtime.thread
<deepactors.actors.Runtime.thread>`): the runtime given, or one opened for the
call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..actors import AgentSpec, Runtime, ThreadHandle, ThreadState, open_runtime, run_sync
from ..errors import ConfigurationError, InputError
from ..persistence import CheckpointRecord
from ._config import read_config

__all__ = ["SavedThreads"]

T = TypeVar("T")


class SavedThreads:
    """Reading a thread back from the agent's checkpointer (mixed into ``DeepAgent``)."""

    __slots__ = ()

    @property
    def spec(self) -> AgentSpec:
        """The agent's resolved parts."""
        raise NotImplementedError

    async def _on_thread(
        self,
        thread: str | Mapping[str, Any],
        runtime: Runtime | None,
        act: Callable[[ThreadHandle], Awaitable[T]],
    ) -> T:
        """``act`` on the thread's handle: under ``runtime``, or one opened for it."""
        thread_id = _thread(thread)
        if runtime is not None:
            return await act(runtime.thread(self, thread_id))
        found: list[T] = []
        error: Exception | None = None
        async with open_runtime(pacing=None) as rt:
            try:
                found.append(await act(rt.thread(self, thread_id)))
            except Exception as exc:
                # Raised outside the runtime's task group, so the caller gets
                # this exception itself, not an ExceptionGroup around it.
                error = exc
        if error is not None:
            raise error
        return found[0]

    async def ahistory(
        self, thread_id: str | Mapping[str, Any], *, runtime: Runtime | None = None
    ) -> list[CheckpointRecord]:
        """Every checkpoint record of a thread that counts, oldest first (every actor).

        Each record has ``seq`` (its position), ``path`` (the actor), ``step`` (that
        actor's model calls so far), ``kind`` (``update``, ``tool_result``,
        ``interrupt``, ``resume``) and ``created_at``. Records a rollback took
        back are left out.

        Raises:
            ConfigurationError: The agent has no checkpointer.
        """
        return await self._on_thread(thread_id, runtime, lambda h: h.history())

    async def aget_state(
        self,
        thread: str | Mapping[str, Any],
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
        return await self._on_thread(
            thread, runtime, lambda h: h.state(upto_seq=upto_seq, path=path)
        )

    def get_state(self, thread: str | Mapping[str, Any], **kwargs: Any) -> ThreadState:
        """Blocking :meth:`aget_state`."""
        return run_sync(self.aget_state, thread, backend="asyncio", **kwargs)

    async def aget_state_history(
        self, thread: str | Mapping[str, Any], *, runtime: Runtime | None = None
    ) -> list[ThreadState]:
        """The thread's state after each of its top-level records, newest first.

        LangGraph's ``get_state_history`` order; each snapshot's ``seq`` says
        which record it ends at.
        """

        async def states(handle: ThreadHandle) -> list[ThreadState]:
            records = await handle.history(path=self.spec.name)
            return [await handle.state(upto_seq=r.seq) for r in reversed(records)]

        return await self._on_thread(thread, runtime, states)

    def get_state_history(self, thread: str | Mapping[str, Any]) -> Iterator[ThreadState]:
        """Blocking :meth:`aget_state_history`."""
        return iter(run_sync(self.aget_state_history, thread, backend="asyncio"))

    async def aupdate_state(
        self,
        thread: str | Mapping[str, Any],
        values: Mapping[str, Any],
        as_node: str | None = None,
        *,
        runtime: Runtime | None = None,
    ) -> dict[str, Any]:
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
        await self._on_thread(thread, runtime, lambda h: h.update_state(values))
        return {"configurable": {"thread_id": _thread(thread)}}

    def update_state(
        self, thread: str | Mapping[str, Any], values: Mapping[str, Any], as_node: str | None = None
    ) -> dict[str, Any]:
        """Blocking :meth:`aupdate_state`."""
        return run_sync(self.aupdate_state, thread, values, as_node, backend="asyncio")


def _thread(thread: str | Mapping[str, Any]) -> str:
    if isinstance(thread, str) and thread:
        return thread
    if isinstance(thread, Mapping):
        found = read_config(thread, None).thread_id
        if found is not None:
            return found
    raise InputError(
        f"name a thread: a thread id or {{'configurable': {{'thread_id': ...}}}}, not {thread!r}"
    )

"""The saved-threads half of the agent facade: state snapshots and history."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..actors import AgentSpec, ThreadState, run_sync, saved_history, saved_state
from ..errors import InputError
from ..persistence import CheckpointRecord
from ._config import read_config

__all__ = ["SavedThreads"]


class SavedThreads:
    """Reading a thread back from the agent's checkpointer (mixed into ``DeepAgent``)."""

    __slots__ = ()

    @property
    def spec(self) -> AgentSpec:
        """The agent's resolved parts."""
        raise NotImplementedError

    async def ahistory(self, thread_id: str) -> list[CheckpointRecord]:
        """Every checkpoint record of a thread, oldest first (every actor of its tree).

        Each record has ``seq`` (its position), ``path`` (the actor), ``step`` (that
        actor's model calls so far), ``kind`` (``update``, ``tool_result``,
        ``interrupt``, ``resume``) and ``created_at``.

        Raises:
            ConfigurationError: The agent has no checkpointer.
        """
        return await saved_history(self.spec, _thread(thread_id))

    async def aget_state(
        self,
        thread: str | Mapping[str, Any],
        *,
        upto_seq: int | None = None,
        path: str | None = None,
    ) -> ThreadState:
        """A thread's state as saved, now or as it was at record ``upto_seq``.

        Args:
            thread: The thread id, or LangGraph's ``config`` naming it.
            upto_seq: Rebuild from the records up to this one (see :meth:`ahistory`).
            path: Another actor of the tree (a subagent, ``main/task-2:researcher``).

        Returns:
            The channel values (``state["messages"]``), also readable as LangGraph's
            snapshot: ``.values``, ``.next``, ``.tasks``, ``.config``.

        Raises:
            ConfigurationError: The agent has no checkpointer.
            CheckpointCorrupt: A record cannot be read; the error names the thread.
        """
        return await saved_state(self.spec, _thread(thread), upto_seq=upto_seq, path=path)

    def get_state(self, thread: str | Mapping[str, Any], **kwargs: Any) -> ThreadState:
        """Blocking :meth:`aget_state`."""
        return run_sync(self.aget_state, thread, backend="asyncio", **kwargs)

    async def aget_state_history(self, thread: str | Mapping[str, Any]) -> list[ThreadState]:
        """The thread's state after each of its top-level records, newest first.

        LangGraph's ``get_state_history`` order; each snapshot's ``seq`` says
        which record it ends at.
        """
        thread_id = _thread(thread)
        records = await saved_history(self.spec, thread_id)
        seqs = [r.seq for r in records if r.path == self.spec.name]
        return [await saved_state(self.spec, thread_id, upto_seq=seq) for seq in reversed(seqs)]

    def get_state_history(self, thread: str | Mapping[str, Any]) -> Iterator[ThreadState]:
        """Blocking :meth:`aget_state_history`."""
        return iter(run_sync(self.aget_state_history, thread, backend="asyncio"))


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

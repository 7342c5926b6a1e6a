"""Acting on an agent's saved threads for the facade: through the thread's handle.

Every call goes through the thread's handle (:meth:`Runtime.thread
<deepactors.actors.Runtime.thread>`): the runtime given, or one opened for the
call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from ..actors import HasSpec, Runtime, ThreadHandle, open_runtime
from ..errors import InputError
from ._config import read_config

__all__ = ["on_thread", "thread_named"]

T = TypeVar("T")


async def on_thread(
    agent: HasSpec,
    thread: str | Mapping[str, object],
    runtime: Runtime | None,
    act: Callable[[ThreadHandle], Awaitable[T]],
) -> T:
    """``act`` on the thread's handle: under ``runtime``, or one opened for it.

    Raises:
        InputError: ``thread`` names no thread.
    """
    thread_id = thread_named(thread)
    if runtime is not None:
        return await act(runtime.thread(agent, thread_id))
    found: list[T] = []
    error: Exception | None = None
    async with open_runtime(pacing=None) as rt:
        try:
            found.append(await act(rt.thread(agent, thread_id)))
        except Exception as exc:
            # Raised outside the runtime's task group, so the caller gets
            # this exception itself, not an ExceptionGroup around it.
            error = exc
    if error is not None:
        raise error
    return found[0]


def thread_named(thread: str | Mapping[str, object]) -> str:
    """The thread id ``thread`` names: the id itself, or LangGraph's config.

    Raises:
        InputError: It names none.
    """
    if isinstance(thread, str) and thread:
        return thread
    if isinstance(thread, Mapping):
        found = read_config(thread, None).thread_id
        if found is not None:
            return found
    raise InputError(
        f"name a thread: a thread id or {{'configurable': {{'thread_id': ...}}}}, not {thread!r}"
    )

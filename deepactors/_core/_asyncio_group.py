"""anyio's task group on asyncio, without the handle anyio 4.14+ gives every task.

Since anyio 4.14, ``TaskGroup.start_soon`` on asyncio wraps each task in a
``TaskHandle``: a cancel scope of its own (an object and two sets), an
``anyio.Event`` (an ``asyncio.Event`` and its deque, ~0.8 KiB alone), a wrapper
coroutine and a closure, ~2.4 KiB per task that nothing here reads (the
runtime's groups never await or cancel one task). A parent waiting on 100,000
subagents placed on Ray holds 100,000 such tasks at once: ~240 MB.

:class:`LeanTaskGroup` is that task group with ``start_soon`` as anyio had it
before handles: the task runs the coroutine itself, in the group's cancel
scope, registered with anyio exactly as anyio registers its own tasks (so
cancel scopes, shields, deadlines and errors behave the same). It reaches into
anyio's asyncio backend; :func:`lean_task_group` checks once that what it uses
is there, and gives anyio's own task group when it is not (another anyio
version, an eager task factory).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

__all__ = ["lean_task_group"]

try:  # anyio's asyncio backend, as of 4.6-4.16
    from anyio._backends import _asyncio as _backend

    _Base: Any = _backend.TaskGroup
    _STATES: Any = _backend._task_states
    _TaskState: Any = _backend.TaskState
except (ImportError, AttributeError):  # pragma: no cover (another anyio)
    _Base = None


class _LeanTaskGroup(_Base or object):  # type: ignore[misc]
    """anyio's asyncio task group whose ``start_soon`` spawns a bare task (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        # Made once, not per task: a bound method, and the context the
        # callback runs in (by default a copy of the spawner's, per task;
        # it reads no context variable).
        self._done = self._task_done
        self._done_context = contextvars.Context()

    def start_soon(
        self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: object = None
    ) -> None:
        """Start ``func(*args)`` as a task of the group (its name is asyncio's default)."""
        scope = self.cancel_scope
        if not self._entered or not scope._active:
            raise RuntimeError("This task group is not active; no new tasks can be started.")
        coro = func(*args)
        task = asyncio.get_running_loop().create_task(coro)
        # As anyio's own _spawn does: the task belongs to the group's scope, so a
        # scope opened inside it nests there and a cancel of the group reaches it.
        _STATES[task] = _TaskState(parent_id=id(scope._host_task), cancel_scope=scope)
        scope._tasks.add(task)
        self._tasks.add(task)
        task.add_done_callback(self._done, context=self._done_context)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        # anyio's task_done, for a task without a handle.
        state = _STATES.pop(task)
        state.cancel_scope._tasks.discard(task)
        self._tasks.discard(task)
        waiting = self._on_completed_fut
        if waiting is not None and not self._tasks and not waiting.done():
            waiting.set_result(None)
        try:
            exc = task.exception()
        except asyncio.CancelledError as e:
            while isinstance(e.__context__, asyncio.CancelledError):
                e = e.__context__
            exc = e
        if exc is not None:
            if not isinstance(exc, asyncio.CancelledError):
                self._exceptions.append(exc)
            if not self.cancel_scope._effectively_cancelled:
                self.cancel_scope.cancel()


@functools.cache
def _usable() -> bool:
    """Whether this anyio's asyncio task group has what :class:`_LeanTaskGroup` uses."""
    if _Base is None:
        return False
    try:
        group = _LeanTaskGroup()
        scope = group.cancel_scope
        return (
            all(hasattr(group, name) for name in ("_entered", "_tasks", "_exceptions"))
            and all(hasattr(scope, name) for name in ("_active", "_host_task", "_tasks"))
            and "_on_completed_fut" in vars(group)
            and hasattr(scope, "_effectively_cancelled")
        )
    except Exception:  # pragma: no cover (another anyio)
        return False


def lean_task_group() -> anyio.abc.TaskGroup:
    """A task group for the running asyncio loop: the lean one where it can be."""
    loop = asyncio.get_running_loop()
    if loop.get_task_factory() is not None or not _usable():
        # An eager factory would run the task before it is registered.
        return anyio.create_task_group()
    group: anyio.abc.TaskGroup = _LeanTaskGroup()
    return group

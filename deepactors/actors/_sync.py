"""The sync API: thin blocking wrappers over the async core."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

import anyio
import anyio.from_thread

from .._core.loops import loop_running_here

__all__ = ["run_sync", "stream_sync"]

T = TypeVar("T")

_BACKENDS = ("asyncio", "trio")


def _check_backend(backend: str) -> None:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be 'asyncio' or 'trio', not {backend!r}")


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, backend: str, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` to completion on a fresh event loop.

    In a thread whose loop is already running (a notebook cell, or sync code
    called from async code), a fresh loop cannot start here, so the call runs on a
    loop in a worker thread and this thread waits for it.
    """
    _check_backend(backend)
    call = functools.partial(fn, *args, **kwargs)
    if not loop_running_here():
        return anyio.run(call, backend=backend)
    with anyio.from_thread.start_blocking_portal(backend) as portal:
        return portal.call(call)


class _Parts(Protocol):
    """Anything read with ``__anext__``: an event stream, or LangGraph-shaped parts."""

    def __anext__(self) -> Awaitable[Any]: ...


def stream_sync(
    make: Callable[[], AbstractAsyncContextManager[_Parts]], *, backend: str
) -> Iterator[Any]:
    """Iterate an event stream from sync code, on a loop in a worker thread.

    ``make`` returns the async context manager that opens the stream; it is
    entered and left in one task of the worker's loop.
    """
    _check_backend(backend)
    with (
        anyio.from_thread.start_blocking_portal(backend) as portal,
        portal.wrap_async_context_manager(make()) as stream,
    ):
        while True:
            try:
                event = portal.call(stream.__anext__)
            except StopAsyncIteration:
                return
            yield event

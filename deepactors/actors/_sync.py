"""The sync API: thin blocking wrappers over the async core, on one kept loop per backend.

Every sync call (``invoke``, ``stream``, ``get_state``, ...) runs on one event
loop of its backend that lives in a daemon thread for the life of the process:
the first sync call starts it, and calls from any thread, with or without a
loop of their own running (a notebook cell, sync code called from a trio task),
are sent to it and run there concurrently while the calling thread waits.

Why one kept loop rather than a fresh one per call: what an object made on an
event loop keeps for later (an HTTP client, a connection pool) stays valid only
while that loop lives. LangChain's chat models keep one async HTTP client per
process (langchain-openai caches it), so with a fresh loop per call every
second call found the client bound to a closed loop. deepactors' own models and
checkpointers keep their clients per loop run (``_core.perloop``), so on the
kept loop they are made once, reused by later calls, and closed as the process
exits.

The calling thread's context variables (a tracing span, structlog's bound
values) are copied into the call's task. Ctrl-C while a call waits cancels the
call on the loop, waits for it to finish cleaning up, then raises
``KeyboardInterrupt`` in the caller. A sync call made by code running on the
kept loop itself runs on a loop of its own in a worker thread (waiting for its
own loop would never end). A process forked after the loop started starts a
loop of its own on its first sync call.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, Protocol, TypeVar

import anyio
import sniffio
from anyio.streams.memory import MemoryObjectSendStream

from .._core.loops import LoopRun, current_run

__all__ = ["SYNC_EXIT_GRACE", "run_sync", "stream_sync"]

T = TypeVar("T")

_BACKENDS = ("asyncio", "trio")

SYNC_EXIT_GRACE = 5.0
"""Seconds the process's exit waits for a kept loop to cancel what still runs on it
and close what it holds (HTTP clients, connections), before leaving it."""

# Context variables that say which loop a task runs on: never copied from a
# caller on another loop into the kept loop's task.
_LOOP_VARS = frozenset({sniffio.current_async_library_cvar})

_Values = list[tuple[contextvars.ContextVar[Any], Any]]


def _check_backend(backend: str) -> None:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be 'asyncio' or 'trio', not {backend!r}")


class _LoopGone(RuntimeError):
    """The loop ended before the call could run or finish (the process is exiting)."""

    def __init__(self) -> None:
        super().__init__("the sync API's event loop has shut down (the process is exiting)")


class _Call(Generic[T]):
    """One call on a kept loop: its outcome for the caller, and its cancellation."""

    def __init__(self, fn: Callable[[], Awaitable[T]], values: _Values) -> None:
        self.fn = fn
        self.values = values
        self.outcome: Future[T] = Future()  # the caller waits on it
        self.ended = threading.Event()  # the task is over, cleanup included
        self.cancel_requested = False
        self.scope: anyio.CancelScope | None = None

    async def run(self) -> None:
        try:
            with anyio.CancelScope() as scope:
                self.scope = scope
                if self.cancel_requested:
                    scope.cancel()
                # The task runs in a context of its own: these stay with it.
                for var, value in self.values:
                    var.set(value)
                result = await self.fn()
            if scope.cancelled_caught:
                self.outcome.set_exception(KeyboardInterrupt())  # only the caller cancels
            else:
                self.outcome.set_result(result)
        except Exception as exc:
            self.outcome.set_exception(exc)
        except BaseException:
            # The loop is stopping (cancelled from outside this call's scope).
            if not self.outcome.done():
                self.outcome.set_exception(_LoopGone())
            raise
        finally:
            self.ended.set()

    def fail(self, exc: BaseException) -> None:
        """End a call that never started."""
        self.outcome.set_exception(exc)
        self.ended.set()

    def cancel_in_loop(self) -> None:
        # In the loop's thread, ordered after the task's start if that came first.
        self.cancel_requested = True
        if self.scope is not None:
            self.scope.cancel()


class _KeptLoop:
    """One event loop of one backend in a daemon thread, running calls from other threads.

    Calls come in through a memory stream that only the loop's thread touches
    (other threads schedule the sends with ``call_soon``); a task of the loop
    starts each one in the loop's task group.
    """

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._stopping = threading.Event()
        ready: Future[tuple[LoopRun, MemoryObjectSendStream[_Call[Any]]]] = Future()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name=f"deepactors-sync-{backend}", daemon=True
        )
        self._thread.start()
        self._run, self._calls = ready.result()

    def _serve(self, ready: Future[tuple[LoopRun, MemoryObjectSendStream[_Call[Any]]]]) -> None:
        async def host() -> None:
            calls, receive = anyio.create_memory_object_stream[_Call[Any]](math.inf)
            async with anyio.create_task_group() as tg, receive:
                ready.set_result((current_run(), calls))
                async for call in receive:
                    tg.start_soon(call.run)
                tg.cancel_scope.cancel()  # stopped: cancel the calls still running

        try:
            anyio.run(host, backend=self.backend)
        except BaseException as exc:
            if not ready.done():  # it could not start: the first caller says why
                ready.set_exception(exc)
        finally:
            self._stopping.set()

    def alive(self) -> bool:
        return not self._stopping.is_set()

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def submit(self, call: _Call[Any]) -> None:
        def send() -> None:
            try:
                self._calls.send_nowait(call)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                call.fail(_LoopGone())

        if not self._run.call_soon(send):
            call.fail(_LoopGone())

    def call_soon(self, fn: Callable[[], object]) -> bool:
        return self._run.call_soon(fn)

    def cancel(self, call: _Call[Any]) -> None:
        """Cancel ``call`` and wait until its task is over."""
        self._run.call_soon(call.cancel_in_loop)
        call.ended.wait()

    def stop(self, grace: float | None = SYNC_EXIT_GRACE) -> None:
        """Cancel what still runs, let the loop close its resources, end the thread."""
        self._stopping.set()
        self._run.call_soon(self._calls.close)
        self._thread.join(grace)


def _caller_values() -> _Values:
    context = contextvars.copy_context()
    return [(var, value) for var, value in context.items() if var not in _LOOP_VARS]


_loops: dict[str, _KeptLoop] = {}
_loops_lock = threading.Lock()


def _kept_loop(backend: str) -> _KeptLoop:
    loop = _loops.get(backend)
    if loop is not None and loop.alive():
        return loop
    with _loops_lock:
        loop = _loops.get(backend)
        if loop is None or not loop.alive():
            loop = _loops[backend] = _KeptLoop(backend)
        return loop


def _stop_all() -> None:
    for loop in list(_loops.values()):
        loop.stop()


def _forget_loops() -> None:
    # In a forked child the loops' threads do not exist: its first call starts its own.
    global _loops_lock
    _loops.clear()
    _loops_lock = threading.Lock()


atexit.register(_stop_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loops)


def _loop_for(backend: str) -> tuple[_KeptLoop, bool]:
    """The kept loop of ``backend``, or (called from that loop's own thread) a new one
    to stop after the call; and whether it is such a temporary one."""
    _check_backend(backend)
    loop = _kept_loop(backend)
    if loop.in_loop_thread():
        return _KeptLoop(backend), True
    return loop, False


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, backend: str, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` to completion on ``backend``'s kept loop."""
    loop, temporary = _loop_for(backend)
    call = _Call(lambda: fn(*args, **kwargs), _caller_values())
    try:
        loop.submit(call)
        return call.outcome.result()
    except BaseException:
        # Ctrl-C while waiting, or one that lands after the call was sent but
        # before its wait began (a loaded machine runs the loop's thread first):
        # the call is cancelled and its cleanup awaited.
        if not call.outcome.done():
            loop.cancel(call)
        raise
    finally:
        if temporary:
            loop.stop(grace=None)


class _Parts(Protocol):
    """Anything read with ``__anext__``: an event stream, or LangGraph-shaped parts."""

    def __anext__(self) -> Awaitable[Any]: ...


def stream_sync(
    make: Callable[[], AbstractAsyncContextManager[_Parts]], *, backend: str
) -> Iterator[Any]:
    """Iterate an event stream from sync code, on ``backend``'s kept loop.

    ``make`` returns the async context manager that opens the stream. One task
    of the loop enters it, reads the stream one item per pull of the caller,
    and leaves it when the stream ends or fails, or the caller stops iterating.
    """
    loop, temporary = _loop_for(backend)
    pulls, receive = anyio.create_memory_object_stream[Future[Any]](math.inf)

    async def serve() -> None:
        async with receive, make() as stream:
            async for pull in receive:
                try:
                    pull.set_result(await stream.__anext__())
                except StopAsyncIteration:
                    pull.set_exception(StopAsyncIteration())
                    return
                except Exception as exc:
                    pull.set_exception(exc)
                    raise  # the stream's exit sees it too

    call: _Call[None] = _Call(serve, _caller_values())
    try:
        loop.submit(call)
        while True:
            pull: Future[Any] = Future()
            loop.call_soon(functools.partial(_offer, pulls, pull))
            try:
                item = _answer(loop, call, pull)
            except StopAsyncIteration:
                return
            yield item
    finally:
        # The caller is done (the stream ended, failed, or was left early): the
        # task leaves the stream once its pulls end.
        if not loop.call_soon(pulls.close):
            pulls.close()  # the loop is gone; nothing reads them
        call.ended.wait()
        if temporary:
            loop.stop(grace=None)


def _offer(pulls: MemoryObjectSendStream[Future[Any]], pull: Future[Any]) -> None:
    # A task that has ended reads no pulls: its outcome answers the caller.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        pulls.send_nowait(pull)


def _answer(loop: _KeptLoop, call: _Call[None], pull: Future[T]) -> T:
    """``pull``'s item, or the task's failure if it ended first (Ctrl-C: cancelled)."""
    try:
        futures: list[Future[Any]] = [pull, call.outcome]
        wait(futures, return_when=FIRST_COMPLETED)
    except BaseException:
        loop.cancel(call)
        raise
    if pull.done():
        return pull.result()
    call.outcome.result()  # raises what ended it
    raise _LoopGone()

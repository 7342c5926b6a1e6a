"""Waiting for what other tasks, threads or processes make true: the tests' one polling helper.

Wait on an event where there is one (``anyio.Event``, ``threading.Event``, a task's
``result()``). Poll only what has none: another process's files or life, a
server's state read over HTTP, a table in a database, a server's own thread.
:func:`wait_until` polls from async code, :func:`wait_until_sync` from a plain
thread (a sync test, a fixture, a tool run in a worker thread); both return the
first true value ``check`` gave, and both fail with an ``AssertionError`` naming
``what`` did not happen if it does not happen within ``timeout``: the bound only
guards against a hang, so it is generous.

On virtual time (tests/vtime.py), :func:`wait_until`'s polls and bound are in
virtual seconds: right for a condition that tasks on the loop bring about, wrong
for one fed from outside the loop (the clock would run to the bound at once),
which belongs on the real clock.
"""

from __future__ import annotations

import inspect
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import httpx

__all__ = ["http_ok", "port_open", "wait_until", "wait_until_serving", "wait_until_sync"]

T = TypeVar("T")


async def wait_until(
    check: Callable[[], T | Awaitable[T]],
    *,
    what: str = "the condition",
    timeout: float = 20.0,
    interval: float = 0.01,
) -> T:
    """Call ``check`` (sync or async) every ``interval`` seconds until it returns a true value.

    Args:
        check: What to ask; an awaitable it returns is awaited.
        what: What is awaited, for the failure's message.
        timeout: Seconds before giving up (a guard against a hang, not a measure).
        interval: Seconds between two checks.

    Returns:
        The first true value ``check`` gave.

    Raises:
        AssertionError: ``check`` gave no true value within ``timeout``.
    """
    with anyio.move_on_after(timeout):
        while True:
            found = check()
            if inspect.isawaitable(found):
                found = await found
            if found:
                return cast(T, found)
            await anyio.sleep(interval)
    raise AssertionError(f"not within {timeout} s: {what}")


def wait_until_sync(
    check: Callable[[], T],
    *,
    what: str = "the condition",
    timeout: float = 20.0,
    interval: float = 0.01,
) -> T:
    """:func:`wait_until` for a thread with no event loop: a sync test, fixture or tool.

    Args:
        check: What to ask.
        what: What is awaited, for the failure's message.
        timeout: Seconds before giving up (a guard against a hang, not a measure).
        interval: Seconds between two checks.

    Returns:
        The first true value ``check`` gave.

    Raises:
        AssertionError: ``check`` gave no true value within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(interval)
    return found


def wait_until_serving(
    process: subprocess.Popen[Any],
    check: Callable[[], bool],
    *,
    what: str = "the server started",
    timeout: float = 30.0,
    log: Path | None = None,
) -> None:
    """Wait until a server ``process`` the test started passes ``check``; fail at once if it ends.

    Args:
        process: The server's process.
        check: Whether it serves yet (:func:`http_ok`, :func:`port_open`).
        what: What is awaited, for the failure's message.
        timeout: Seconds before giving up.
        log: The file its output goes to, shown if it ends.
    """

    def up() -> bool:
        if process.poll() is not None:
            output = log.read_text() if log is not None and log.exists() else ""
            raise AssertionError(f"{what}: no, it ended ({process.returncode})\n{output}")
        return check()

    wait_until_sync(up, what=what, timeout=timeout, interval=0.05)


def http_ok(url: str) -> bool:
    """Whether a GET of ``url`` answers 200 now."""
    try:
        return httpx.get(url).status_code == 200
    except httpx.TransportError:
        return False


def port_open(port: int) -> bool:
    """Whether something on 127.0.0.1 accepts a connection on ``port`` now."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True

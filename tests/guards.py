"""Guards against a hang in synchronous code, which ``anyio.fail_after`` cannot interrupt.

A guard is not a speed figure: its bound is generous (far above what the code
needs on a loaded machine, far below what the broken code would take, e.g. a
backtracking engine on a catastrophic pattern: centuries), and it only turns a
hang into a failure. How fast the code is belongs in ``bench/``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

__all__ = ["returns_within"]


def returns_within(seconds: float, fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn(*args)`` in a daemon thread; fail the test if it has not returned in ``seconds``.

    The thread is left running if it hangs (a daemon: it ends with the test
    process); an exception ``fn`` raises is raised here.
    """
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=call, name=f"guarded {fn.__name__}", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"{fn.__name__} did not return within {seconds} s (a hang guard)")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]

"""What the placement tests ask the workers, and how they wait for a condition."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from deepactors.placement import RayPlacement

T = TypeVar("T")


async def live_children(placement: RayPlacement) -> int:
    """Children running on the placement's workers now, as the workers count them."""
    return sum(s.running for s in await placement.worker_statistics())


async def until(check: Callable[[], Awaitable[T]], ok: Callable[[T], bool]) -> T:
    """Ask ``check`` every 0.1 s until ``ok`` says yes (the caller bounds the wait)."""
    for _ in range(100_000):
        found = await check()
        if ok(found):
            return found
        await anyio.sleep(0.1)
    raise AssertionError("unreachable")

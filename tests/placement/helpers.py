"""What the placement tests ask the workers, and how they wait for a condition."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from deepactors.placement import RayPlacement
from tests.waiting import wait_until

T = TypeVar("T")


async def live_children(placement: RayPlacement) -> int:
    """Children running on the placement's workers now, as the workers count them."""
    return sum(s.running for s in await placement.worker_statistics())


async def until(check: Callable[[], Awaitable[T]], ok: Callable[[T], bool]) -> T:
    """Ask ``check`` every 0.1 s until ``ok`` says yes (the caller bounds the wait)."""

    async def met() -> tuple[T] | None:
        found = await check()
        return (found,) if ok(found) else None  # (a tuple: what is found may be false)

    (found,) = await wait_until(met, what="the placement's state", timeout=math.inf, interval=0.1)
    return found

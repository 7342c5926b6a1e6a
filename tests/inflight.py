"""How many calls a fake model or tool has in flight at once, for the tests of concurrency caps."""

from __future__ import annotations

import anyio

__all__ = ["InFlight"]


class InFlight:
    """Counts the calls in flight: :attr:`now`, and :attr:`peak`, the most there ever were.

    A fake model or tool calls :meth:`work` to be one call that takes a while; a
    test marked ``virtual_time`` pays nothing for the while.
    """

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def work(self, seconds: float) -> None:
        """Be one call in flight for ``seconds``."""
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await anyio.sleep(seconds)
        finally:
            self.now -= 1

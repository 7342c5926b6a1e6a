"""Virtual time for tests, on both loops: the loop's clock jumps when the loop would wait.

trio has this built in: ``trio.testing.MockClock(autojump_threshold=0)``, passed to
``trio.run`` as its clock, keeps time still while tasks run and, the moment every
task is blocked, jumps straight to the next deadline. :class:`VirtualClockLoop` is
the same for asyncio: a selector event loop whose :meth:`~VirtualClockLoop.time`
is a virtual clock, and whose selector, asked to wait up to the next timer with
nothing ready, moves the clock to that timer instead of sleeping. With nothing
scheduled it waits for I/O as usual (so a test that truly hangs still hangs, as it
would on trio; ``anyio.fail_after`` turns that into an instant ``TimeoutError``).

``tests/conftest.py``'s ``anyio_backend`` fixture hands both to the anyio plugin
for tests marked ``virtual_time``. The price, the same on both loops: the clock
jumps whenever the loop has nothing to do *now*, including while it waits on a
worker thread, a subprocess or a socket fed from outside. A test on virtual time
therefore must not wait on such things under a deadline (the deadline would fire
at once); give it ``autojump_threshold=`` (seconds of real idleness before a jump)
or leave it on real time.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

import sniffio
import trio
import trio.testing

__all__ = ["VirtualClockLoop", "jump"]


class _JumpingSelector(selectors.DefaultSelector):
    """The platform's selector, which moves its loop's clock instead of waiting for a timer."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # asyncio asks for ``timeout`` = time until its next timer (None: no timer, 0: work ready).
        if timeout is None or timeout <= 0 or not self._loop.jumping:
            return super().select(timeout)
        ready = super().select(min(timeout, self._loop.autojump_threshold))
        if not ready:
            self._loop.advance(timeout)
        return ready


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock that starts at 0 and jumps to the next timer when idle.

    Args:
        autojump_threshold: seconds of real idleness (no I/O ready, nothing to run)
            before the clock jumps to the next timer; 0, the default, jumps at once,
            as ``trio.testing.MockClock(autojump_threshold=0)`` does.
    """

    def __init__(self, *, autojump_threshold: float = 0.0) -> None:
        self.autojump_threshold = autojump_threshold
        self.jumping = True
        self._now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward (the selector does this when the loop would wait)."""
        self._now += seconds

    async def shutdown_default_executor(self, *args: Any) -> None:
        # Python 3.12+ bounds the executor's join with a loop timeout; joining threads
        # is real work, so wait for it in real time rather than jump past the bound.
        self.jumping = False
        try:
            await super().shutdown_default_executor(*args)
        finally:
            self.jumping = True


def jump(seconds: float) -> None:
    """Move the running loop's virtual clock forward now, without yielding.

    What a call that holds the event loop for ``seconds`` looks like to the loop,
    on a test marked ``virtual_time`` (on either loop), at no real cost.
    """
    if sniffio.current_async_library() == "trio":
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock), "not on virtual time"
        clock.jump(seconds)
    else:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualClockLoop), "not on virtual time"
        loop.advance(seconds)

"""Fair turns on a busy event loop: a wide fan-out never freezes the loop for long.

asyncio and trio both run, in one turn of the loop, every task that was ready
when the turn began, and look at timers and sockets only between turns. When
10,000 subagents' model calls return together, one turn runs 10,000 agent steps:
a second or more in which no timer fires, no request is read and no stream is
written, for every other task in the process (a web server's clients above all).

A :class:`Pacer` bounds that. Before a step, an actor asks :meth:`Pacer.due`
(a clock read and a comparison, nothing allocated). Steps go ahead until the
current *slice* is ``quantum`` seconds old; after that, steps park in FIFO
order. A pump task ticks once per loop turn while
there is work: each tick starts a new slice and lets the next parked steps go,
as many as fit in ``quantum`` (the count adapts to the measured length of the
turns). Between turns the loop polls sockets and fires timers as usual, so a
timer or a request waits about one slice, not for the whole wave.

Only actor steps are paced (a run's start, a model call's return, a tool
call's start, a fan-out's spawning): the rest of the process (a server's
request handling, a user's own tasks) runs as before, ahead of parked steps.
A step itself is never split: a tool that computes for 50 ms still holds the
loop for 50 ms. Without contention nothing parks, and the cost is a clock read
per step; under contention a parked step costs a few microseconds.
"""

from __future__ import annotations

import math
import time

import anyio
import anyio.lowlevel

from .loops import Lot, parking_lot

__all__ = ["DEFAULT_QUANTUM", "Pacer"]

DEFAULT_QUANTUM = 0.005
"""Seconds of actor steps per loop turn before the loop gets to poll and fire timers."""

_MAX_BATCH = 4096


class Pacer:
    """Lets actor steps run in slices of about ``quantum`` seconds per loop turn.

    Made and run (:meth:`run`, in a task) by the runtime, one per runtime;
    actors reach it through their tree's context. See the module docstring.

    Args:
        quantum: Seconds of steps per loop turn; ``math.inf`` turns pacing off.

    Raises:
        ValueError: ``quantum`` is not a positive number.
    """

    __slots__ = ("_batch", "_busy", "_idle", "_lot", "_quantum", "_sleep", "_slice", "_stopped")

    def __init__(self, quantum: float = DEFAULT_QUANTUM) -> None:
        if not quantum > 0:  # NaN too
            raise ValueError(f"quantum must be a positive number of seconds, not {quantum!r}")
        self._quantum = quantum
        self._slice = -math.inf  # when the current slice began (the first step starts one)
        self._batch = 16  # parked steps let go per tick (adapts)
        self._busy = False  # a step asked since the last tick
        self._idle = True  # the pump is asleep: a step that finds the slice old wakes it
        self._stopped = math.isinf(quantum)
        self._lot: Lot | None = None
        # Where the pump sleeps while the loop is quiet: a parking lot, not an
        # event per wake (it wakes after every quiet spell, as often as each
        # step that waits for a worker thread, say).
        self._sleep: Lot | None = None

    @property
    def quantum(self) -> float:
        """Seconds of steps per loop turn."""
        return self._quantum

    @property
    def parked(self) -> int:
        """How many steps wait for their turn now."""
        return 0 if self._lot is None else len(self._lot)

    def due(self) -> bool:
        """Whether the caller must ``await pacer.wait()`` before its step.

        Cheap enough to ask before every step: no allocation, one clock read.
        """
        if self._idle:
            if self._stopped or self._sleep is None:
                return False  # not running (yet, or any more): nothing paces
            now = time.perf_counter()
            if now - self._slice < self._quantum:
                # The pump sleeps on while the slice is young: an agent whose
                # every step waits for a worker thread (a durable journal) has
                # a quiet spell per step, and waking the pump for each cost a
                # loop turn per step. So the loop turn that starts a busy spell
                # may run up to two slices before steps park, never more.
                return False
            # The slice is old: a new one, and the pump wakes to tick from the
            # next loop turn on. Not busy yet: should no other step ask before
            # its first tick, it goes back to sleep at once.
            self._idle = False
            self._slice = now
            self._sleep.unpark(count=1)
            return False
        self._busy = True
        # Not "queue behind whoever waits": a step let go by the last tick asks
        # again at its next pause point a few microseconds later, and parking it
        # then would double the parks of a saturated loop. Parked steps still
        # go first in every tick, so nobody waits for ever.
        return time.perf_counter() - self._slice >= self._quantum

    async def wait(self) -> None:
        """Park until the pump lets this step go (FIFO among parked steps)."""
        lot = self._lot
        if lot is None or self._stopped:
            return
        await lot.park()

    async def run(self) -> None:
        """The pump: ticks once per loop turn while steps ask; asleep otherwise.

        Runs until cancelled (the runtime cancels it as it closes); parked
        steps are all let go as it ends, so none waits for a pump that is gone.
        """
        checkpoint = anyio.lowlevel.checkpoint
        quantum = self._quantum
        lot = self._lot = parking_lot()
        sleep = self._sleep = parking_lot()
        try:
            while True:
                if self._idle:
                    await sleep.park()  # that is a new loop turn already
                else:
                    await checkpoint()  # one loop turn
                now = time.perf_counter()
                turn = now - self._slice  # the turn just run, about
                self._slice = now
                if lot:
                    # Multiplicative decrease, additive-ish increase: the turns
                    # settle around ``quantum`` whatever a step costs.
                    if turn > 1.5 * quantum:
                        self._batch = max(1, int(self._batch * quantum / turn))
                    elif turn < quantum:
                        self._batch = min(_MAX_BATCH, self._batch + 1 + self._batch // 8)
                    lot.unpark(count=self._batch)
                elif not self._busy:
                    self._idle = True
                self._busy = False
        finally:
            self._stopped = self._idle = True
            lot.unpark(count=len(lot))

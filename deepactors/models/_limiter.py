"""A fair limit on concurrent model requests, shared by every actor using one model.

A thousand subagents over one API key that all call the model at once buy
nothing but 429s. :class:`RequestLimiter` lets at most ``max_in_flight``
requests through at a time and queues the rest first come, first served. Waiting
is an ordinary ``await``, so a run's deadline (``anyio.fail_after``) counts the
time spent in the queue and cancels a waiter cleanly.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Literal, final

import anyio
import anyio.lowlevel

from deepactors._core.loops import Wakeup
from deepactors.errors import ConfigurationError
from deepactors.events import CustomEvent

if TYPE_CHECKING:
    from ._base import ModelRequest

__all__ = ["RequestLimiter", "RequestLimiterStatistics"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RequestLimiterStatistics:
    """A snapshot of a :class:`RequestLimiter`.

    Attributes:
        max_in_flight: The limit.
        in_flight: Requests holding a slot now.
        waiting: Requests queued for a slot now.
        peak_in_flight: The most requests that ever held a slot at once.
        peak_waiting: The longest the queue has been.
        total_acquired: Slots handed out so far.
        total_wait_seconds: Time all requests together spent queued.
    """

    max_in_flight: int
    in_flight: int
    waiting: int
    peak_in_flight: int
    peak_waiting: int
    total_acquired: int
    total_wait_seconds: float


@dataclass(slots=True, kw_only=True, eq=False)
class _Waiter:
    """One queued acquire: the wake-up of its run, and where it stands.

    ``state`` changes under the limiter's lock only: ``waiting`` in the queue,
    ``granted`` a slot by :meth:`RequestLimiter.release` (maybe not woken yet),
    ``done`` once the slot is in use or passed on. It, not the wake-up, says who
    owns the slot: a wake-up sent to another loop lands later.
    """

    wakeup: Wakeup
    state: Literal["waiting", "granted", "done"] = field(default="waiting")


@final
class RequestLimiter:
    """At most ``max_in_flight`` holders at once; the others wait in FIFO order.

    Use it as ``async with limiter:`` around one request. A freed slot is handed
    straight to the oldest waiter, so a newcomer can never overtake the queue.

    Unlike an ``anyio.Semaphore`` made outside an event loop, nothing here is bound
    to a loop: a waiter's event is created when it starts waiting, so one limiter
    (and the model owning it) can serve successive ``anyio.run`` calls, on asyncio
    or trio, and several event loops in several threads at once (a model shared
    by the threads of a web server that each call ``invoke``). The state is
    guarded by a lock held only for a few instructions, and a slot handed to a
    waiter of another loop wakes it through that loop's thread-safe call-soon,
    without blocking the releasing loop.

    Args:
        max_in_flight: How many holders may run at once (>= 1).

    Raises:
        ConfigurationError: ``max_in_flight`` is below 1.
    """

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ConfigurationError(f"max_in_flight must be >= 1, not {max_in_flight}")
        self._max = max_in_flight
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiters: deque[_Waiter] = deque()
        self._peak_in_flight = 0
        self._peak_waiting = 0
        self._total_acquired = 0
        self._total_wait = 0.0

    @property
    def max_in_flight(self) -> int:
        """The limit given at construction."""
        return self._max

    async def acquire(self) -> float:
        """Wait for a slot (FIFO) and take it. Cancellation while waiting takes nothing.

        Returns:
            The seconds spent waiting (0.0 when a slot was free).
        """
        await anyio.lowlevel.checkpoint()
        with self._lock:
            if self._in_flight < self._max and not self._waiters:
                self._in_flight += 1
                self._total_acquired += 1
                self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
                return 0.0
            waiter = _Waiter(wakeup=Wakeup())
            self._waiters.append(waiter)
            self._peak_waiting = max(self._peak_waiting, len(self._waiters))
        started = anyio.current_time()
        try:
            await waiter.wakeup.wait()
        except BaseException:
            with self._lock:
                if waiter.state == "waiting":
                    self._waiters.remove(waiter)
                    handed_over = False
                else:
                    handed_over = waiter.state == "granted"
                waiter.state = "done"
            if handed_over:
                # release() handed us the slot just as we were cancelled: pass it on,
                # or it would be lost for good.
                self.release()
            raise
        finally:
            waited = anyio.current_time() - started
            with self._lock:
                self._total_wait += waited
        with self._lock:
            waiter.state = "done"
            # The slot was transferred by release() without ever becoming free, which
            # is what keeps the order fair; count it here.
            self._total_acquired += 1
        return waited

    def release(self) -> None:
        """Give the slot back: to the oldest waiter if there is one.

        May be called from any thread; a waiter in another thread's event loop is
        woken there.

        Raises:
            RuntimeError: More releases than acquisitions.
        """
        with self._lock:
            if self._in_flight <= 0:
                raise RuntimeError("RequestLimiter released more often than acquired")
            if not self._waiters:
                self._in_flight -= 1
                return
            # Hand over without decrementing: in_flight stays the same.
            waiter = self._waiters.popleft()
            waiter.state = "granted"
        if waiter.wakeup.set():
            return
        # Its loop has ended, so that waiter will never take the slot: unless its
        # cancellation already passed it on, pass it on here.
        with self._lock:
            if waiter.state != "granted":
                return
            waiter.state = "done"
        self.release()

    def statistics(self) -> RequestLimiterStatistics:
        """A frozen snapshot of the limiter's counters."""
        with self._lock:
            return RequestLimiterStatistics(
                max_in_flight=self._max,
                in_flight=self._in_flight,
                waiting=len(self._waiters),
                peak_in_flight=self._peak_in_flight,
                peak_waiting=self._peak_waiting,
                total_acquired=self._total_acquired,
                total_wait_seconds=self._total_wait,
            )

    def report_wait(self, request: ModelRequest, waited: float, model: str) -> None:
        """Tell the run's listeners that a call of ``model`` waited ``waited`` s for a slot.

        A ``CustomEvent`` ``{"type": "model_request_queued", "model", "waited",
        "in_flight", "waiting"}``; nothing when it did not wait or nobody listens.
        """
        run = request.run
        if not waited or run is None or run.emit is None:
            return
        stats = self.statistics()
        run.emit(
            CustomEvent(
                path=run.path,
                run_id=run.run_id,
                data={
                    "type": "model_request_queued",
                    "model": model,
                    "waited": waited,
                    "in_flight": stats.in_flight,
                    "waiting": stats.waiting,
                },
            )
        )

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return (
            f"RequestLimiter(max_in_flight={self._max}, in_flight={self._in_flight}, "
            f"waiting={len(self._waiters)})"
        )

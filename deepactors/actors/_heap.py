"""The opt-in collector settings of :func:`~deepactors.actors.open_runtime`.

CPython's cyclic collector walks every tracked object at each full (generation
2) collection, so a full pause grows with everything alive. Two things a
runtime can do about it, both process-wide and so never done unasked:

- ``freeze_heap=True`` (:func:`frozen_heap`): what is alive when the runtime
  opens (imported modules, the model SDK: ``anthropic`` alone is ~120,000
  objects, compiled agents, tool schemas) never becomes garbage; ``gc.freeze()``
  moves it out of the collector's sight.
- ``defer_gc=True`` (:func:`deferred_collections`): while a run is in progress, a
  full collection that falls due walks nothing: a ``gc.callbacks`` hook moves
  the objects alive then out of sight (``gc.freeze()``) as it starts. At 10,000
  concurrent subagents each full collection would walk ~800,000 objects (a
  pause of 0.4 s on a 2-core VM), all of them alive, because the runtime
  leaves no reference cycle behind (``tests/core/test_gc.py``): a finished
  actor is freed by reference counting, frozen or not. When no run is in
  progress any more (at most every :data:`HANDBACK_GAP` seconds), or after
  ``MAX_DEFER`` seconds of deferring under constant load, the objects are
  handed back (``gc.unfreeze()``) and collected then and there, at the end of
  a run, on a heap the fan-out has left (one full collection). Handed back
  without that collection, they would wait in the old generation for a full
  collection that rarely falls due, and the next deferred collection would
  freeze them again: cyclic garbage made during runs (a trio server makes some
  on every request) was never collected, ~3.5 KB a run. Young collections run
  as always when they come close together; cyclic garbage that lives long
  enough to be frozen (made by code outside the runtime) waits for the
  hand-back.

And one thing it does by default, because it changes nothing but how often a
collection falls due, and only for a while: a run whose step makes
:data:`FANOUT_WIDTH` tool calls or more holds full collections off
(:func:`hold_full_collections`) from that step to its end. Each full collection
would walk the fan-out's children, then their results in the run's history (a
walk costs ~0.5-1 us per object on a 2-core VM: 0.4 s at 100,000 subagents, due
dozens of times per fan-out under CPython's default thresholds), and would find
nothing to free: the runtime leaves no reference cycle behind, so finished
children are freed by reference counting. While held, the collector's third
threshold is at least :data:`FULL_EVERY`: young collections run as always (and
free young cycles), and a full collection still falls due after that many of
them, so cyclic garbage of code outside the runtime is collected however long
fan-outs last. When the last such run ends, the threshold is put back, unless
someone set another one meanwhile. Nothing is frozen, so ``freeze_heap``,
``defer_gc`` and a ``gc.freeze()`` of the application's own are left alone.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator, Sized
from types import TracebackType

__all__ = [
    "FANOUT_WIDTH",
    "FULL_EVERY",
    "HANDBACK_GAP",
    "MAX_DEFER",
    "FanoutHold",
    "deferred_collections",
    "frozen_heap",
    "hold_full_collections",
    "release_full_collections",
    "run_in_progress",
]

FANOUT_WIDTH = 100
"""Tool calls in one step from which the run holds full collections off until it ends."""

FULL_EVERY = 10_000
"""The collector's third threshold while full collections are held off: young
(generation 1) collections between two full ones, 1,000x CPython's default 10.
About 70 million allocations: a fan-out of 100,000 subagents makes ~1,000."""

MAX_DEFER = 30.0
"""Seconds full collections may be deferred in a row, under constant load."""

HANDBACK_GAP = 5.0
"""Seconds between two hand-backs when no run is in progress: each is a full
collection, and a server idle for a moment between every two requests would
otherwise make one after each. What is frozen meanwhile stays frozen (alive or
cyclic garbage), bounded by what runs make in that time."""

YOUNG_GAP = 0.01
"""Seconds after which a due young collection is deferred too.

A young collection is due when allocations outrun deallocations by 700,
whichever objects those are: while a fan-out's children end (old objects freed)
and their results arrive (new ones), the youngest generation can grow to
hundreds of thousands of live objects before it is collected, as long a pause as
a full one. Counting it would touch every object; the time since the last
collection bounds it instead (what a few ms can allocate)."""


class _Collector:
    """The process-wide state of both settings; a ``gc.callbacks`` hook while deferring.

    The hook runs in whichever thread allocates, between any two bytecodes, so it
    takes no lock (a lock held by the same thread would deadlock it); it only
    freezes or thaws, which the interpreter does atomically.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()  # runtimes of event loops in other threads
        self.holders = 0  # runtimes with freeze_heap=True
        self.deferrers = 0  # runtimes with defer_gc=True
        self.running = 0  # runs in progress under those runtimes
        self.deferring_since: float | None = None  # when the first deferred collection fell due
        self.refreeze = False  # freeze what survives the next full collection (freeze_heap)
        self.last_stop = 0.0  # when the last collection ended
        self.collecting = False  # a hand-back's own full collection is running
        self.last_handback = 0.0  # when the last one ran
        self.holds = 0  # runs holding full collections off (wide fan-outs)
        self.restore: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "stop":
            self.last_stop = now
            if info["generation"] == 2 and self.refreeze:
                # The survivors of a real full collection: the startup heap, or
                # what runs in progress hold; out of sight again.
                self.refreeze = False
                if self.holders or self.running:
                    gc.freeze()
            return
        if self.running <= 0 or not self.deferrers or self.collecting:
            return
        if info["generation"] < 2 and now - self.last_stop < YOUNG_GAP:
            return  # a young generation of what a few ms allocated: quick to walk
        # A full collection, or a young one long after the last (see YOUNG_GAP):
        # freeze what is alive instead of walking it.
        since = self.deferring_since
        if since is None:
            self.deferring_since = now
        elif now - since > MAX_DEFER and info["generation"] == 2:
            # Deferred too long (constant load, a run that never ends): this
            # full one walks everything. (A young one is deferred still: the
            # end of a run hands back, see handback_due.)
            self.deferring_since = None
            gc.unfreeze()
            self.refreeze = True
            return
        gc.freeze()

    def handback_due(self, now: float) -> bool:
        """Called under the lock as a run ends: whether to hand back and collect now."""
        since = self.deferring_since
        if since is None or self.collecting:
            return False
        if self.running == 0:
            return now - self.last_handback >= HANDBACK_GAP
        return now - since > MAX_DEFER

    def handback(self) -> None:
        """Hand what deferring froze back, and collect it: one full collection.

        Not under the lock (the collection calls :meth:`on_gc`, which
        ``collecting`` keeps from freezing meanwhile), in the thread of the run
        that ended, outside any collection.
        """
        gc.unfreeze()
        gc.collect()
        with self.lock:
            self.collecting = False
            self.deferring_since = None
            self.last_handback = time.perf_counter()
            if self.holders:
                gc.freeze()  # freeze_heap: the survivors, out of sight again


_STATE = _Collector()


def _enter(kind: str) -> None:
    with _STATE.lock:
        first = _STATE.holders + _STATE.deferrers == 0
        setattr(_STATE, kind, getattr(_STATE, kind) + 1)
        if first:
            gc.callbacks.append(_STATE.on_gc)
        if kind == "holders" and _STATE.holders == 1:
            gc.collect()
            gc.freeze()


def _exit(kind: str) -> None:
    with _STATE.lock:
        setattr(_STATE, kind, getattr(_STATE, kind) - 1)
        if _STATE.holders == 0 and (kind == "holders" or _STATE.deferring_since is not None):
            # The last freeze_heap runtime closed, or the last deferring one left
            # objects frozen: thaw them all (deferral freezes again when due).
            _STATE.deferring_since = None
            gc.unfreeze()
        if _STATE.holders + _STATE.deferrers == 0:
            gc.callbacks.remove(_STATE.on_gc)
            _STATE.refreeze = False


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the objects alive on entry out of the collector's sight until the last exit.

    On the first entry: one full collection (garbage frozen now would stay until
    the thaw), then ``gc.freeze()``. On the last exit: ``gc.unfreeze()``, which
    hands the objects back to the oldest generation.
    """
    _enter("holders")
    try:
        yield
    finally:
        _exit("holders")


@contextlib.contextmanager
def deferred_collections() -> Iterator[None]:
    """Defer full collections while runs are in progress (see the module docstring).

    Runs mark themselves with :func:`run_in_progress`.
    """
    _enter("deferrers")
    try:
        yield
    finally:
        _exit("deferrers")


@contextlib.contextmanager
def run_in_progress() -> Iterator[None]:
    """Mark a run of a runtime that defers full collections as in progress."""
    with _STATE.lock:
        _STATE.running += 1
    try:
        yield
    finally:
        with _STATE.lock:
            _STATE.running -= 1
            due = _STATE.handback_due(time.perf_counter())
            if due:
                _STATE.collecting = True
        if due:
            _STATE.handback()


def hold_full_collections() -> None:
    """Make full collections rare until :func:`release_full_collections` (see the module docstring).

    Counted: the thresholds are raised by the first hold and put back by the
    last release. Thresholds already at least as high (a server's own) are
    left as they are.
    """
    with _STATE.lock:
        _STATE.holds += 1
        if _STATE.holds > 1:
            return
        young, middle, full = before = gc.get_threshold()
        if young and full < FULL_EVERY:  # young == 0: the collector is off
            held = (young, middle, FULL_EVERY)
            gc.set_threshold(*held)
            _STATE.restore = (held, before)


def release_full_collections() -> None:
    """End one :func:`hold_full_collections`; the last puts the thresholds back."""
    with _STATE.lock:
        _STATE.holds -= 1
        if _STATE.holds or _STATE.restore is None:
            return
        held, before = _STATE.restore
        _STATE.restore = None
        if gc.get_threshold() == held:  # not set again by someone else meanwhile
            gc.set_threshold(*before)


class FanoutHold:
    """One run's hold on full collections: from its first wide step to its end.

    A step of :data:`FANOUT_WIDTH` tool calls or more holds them off
    (:func:`hold_full_collections`): its children, then their results in the
    run's history, are what a full collection would walk for the rest of the
    run. Leaving the ``with`` block releases the hold, however the run ends.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = False

    def __enter__(self) -> FanoutHold:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._held:
            self._held = False
            release_full_collections()

    def step(self, calls: Sized) -> None:
        """A step of the run is about to run ``calls``; hold if it is the first wide one."""
        if not self._held and len(calls) >= FANOUT_WIDTH:
            self._held = True
            hold_full_collections()

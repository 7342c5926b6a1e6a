"""The opt-in heap freeze of :func:`~deepactors.actors.open_runtime` (``freeze_heap=True``).

CPython's cyclic collector walks every tracked object at each full collection,
so a full pause grows with everything alive: the imported modules and the model
SDK (importing ``anthropic`` alone is ~120,000 objects), compiled agents and tool
schemas, none of which ever becomes garbage. ``gc.freeze()`` moves what is alive
now out of its sight. It is process-wide, so it is never done unasked.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["frozen_heap"]


class _Holders:
    """How many runtimes hold the heap frozen: the first freezes, the last thaws."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # runtimes of event loops in other threads
        self.count = 0


_HOLDERS = _Holders()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the objects alive on entry out of the collector's sight until the last exit.

    On the first entry: one full collection (garbage frozen now would stay until
    the thaw), then ``gc.freeze()``. On the last exit: ``gc.unfreeze()``, which
    hands the objects back to the oldest generation.
    """
    with _HOLDERS.lock:
        _HOLDERS.count += 1
        if _HOLDERS.count == 1:
            gc.collect()
            gc.freeze()
    try:
        yield
    finally:
        with _HOLDERS.lock:
            _HOLDERS.count -= 1
            if _HOLDERS.count == 0:
                gc.unfreeze()

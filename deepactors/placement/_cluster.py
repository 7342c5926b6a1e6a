"""Ray itself: connecting to a cluster, the pool of worker actors, Ray's futures on any loop.

Everything that touches Ray's API directly is here (besides the worker's own
node id), imported only when a placement is first used: ``import ray`` costs
a second and ~100 MB, and a tree that places nothing must not pay it.

Ray's async API is asyncio's (``await ref``). :func:`result_of` awaits a
Ray call on asyncio and trio alike: the call's ``concurrent.futures``
future (``ref.future()``) sets a :class:`~deepactors._core.loops.Wakeup` of the
waiting run from Ray's thread, so nothing blocks the loop and no thread waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from .._core.loops import Wakeup
from ..errors import ConfigurationError
from ._worker import PlacementWorker, WorkerInfo

__all__ = ["Pool", "WorkerLost", "open_pool", "result_of", "when_done"]

MAX_CONCURRENCY = 100_000
"""Calls a worker actor runs at once: batches of children, pulls, controls."""


class WorkerLost(Exception):
    """A worker actor died (its process or its node), or cannot be reached."""


@dataclass(slots=True, kw_only=True, eq=False)
class Pool:
    """A placement's worker actors, in this process (shared by every event loop in it).

    Attributes:
        handles: The worker actors, by slot. A dead one is replaced in its slot.
        infos: Where each runs (its process and node), as it said when it started.
    """

    handles: list[Any]
    infos: list[WorkerInfo | None]
    make: Callable[[], Any] = field(repr=False)
    job: str = ""  # the Ray connection (job) the workers belong to
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def replace(self, slot: int, dead: Any) -> Any:
        """A new worker in ``slot`` for the dead one (once, whoever asks first)."""
        with self.lock:  # (held for a list write: no wait to speak of)
            if self.handles[slot] is not dead:
                return self.handles[slot]
            self.handles[slot] = new = self.make()
            self.infos[slot] = None

        def learned(future: Future[Any]) -> None:  # (in Ray's thread)
            if future.exception() is None and self.handles[slot] is new:
                self.infos[slot] = future.result()

        when_done(new.info.remote(), learned)
        return new


_POOLS: dict[object, Pool] = {}  # by placement (kept: pools last as long as the process)
_POOLS_LOCK = threading.Lock()


def open_pool(
    key: object,
    *,
    address: str | None,
    init: Mapping[str, Any],
    workers: int | None,
    worker_cpus: float,
    orphan_timeout: float,
    pacing: float | None,
    start_timeout: float,
) -> Pool:
    """The worker pool of the placement ``key``, started on first use (blocking: in a thread).

    Connects to Ray first unless this process already is: with no ``address``
    (and no ``RAY_ADDRESS`` in the environment) ``ray.init`` starts a local
    Ray on this machine's cores.

    Raises:
        ConfigurationError: Ray is not installed, or the cluster cannot be
            reached, or its workers did not start in ``start_timeout`` seconds.
    """
    with _POOLS_LOCK:
        try:
            import ray
        except ImportError:
            raise ConfigurationError(
                "Ray placement needs Ray: pip install 'deepactors[ray]'"
            ) from None
        pool = _POOLS.get(key)
        if pool is not None and ray.is_initialized() and pool.job == _job(ray):
            return pool
        # (None yet, or its workers were of a Ray this process has left since.)
        if not ray.is_initialized():
            options = {"configure_logging": False, "log_to_driver": False, **init}
            try:
                ray.init(address=address, **options)
            except Exception as exc:
                where = address or "a local Ray"
                raise ConfigurationError(
                    f"could not start or reach {where}: {type(exc).__name__}: {exc}"
                ) from exc
        api: Any = ray  # (parts of Ray's API are untyped)
        # The CPUs free now: all of them on a cluster of one's own, fewer on a
        # shared one (another placement's workers hold theirs).
        free = api.available_resources().get("CPU", 0)
        count = workers or max(1, int(free // worker_cpus))
        actor = api.remote(PlacementWorker).options(
            num_cpus=worker_cpus,
            max_concurrency=MAX_CONCURRENCY,
            scheduling_strategy="SPREAD",
            max_restarts=0,
        )

        def make() -> Any:
            return actor.remote(orphan_timeout, pacing)

        handles = [make() for _ in range(count)]
        try:
            infos = ray.get([h.info.remote() for h in handles], timeout=start_timeout)
        except Exception as exc:
            for handle in handles:
                ray.kill(handle)
            raise ConfigurationError(
                f"{count} Ray worker(s) did not start within {start_timeout:g} s "
                f"({type(exc).__name__}: {exc}); does the cluster have {worker_cpus:g} CPU "
                "free for each?"
            ) from exc
        pool = _POOLS[key] = Pool(handles=handles, infos=list(infos), make=make, job=_job(ray))
        return pool


def _job(ray: Any) -> str:
    return str(ray.get_runtime_context().get_job_id())


def when_done(ref: Any, callback: Callable[[Future[Any]], object]) -> None:
    """Call ``callback(future)`` from Ray's thread once the call ``ref`` has ended.

    The future's outcome is read there (an error read is not reported by Ray as
    an unhandled one).
    """
    ref.future().add_done_callback(callback)


async def result_of(ref: Any) -> Any:
    """The result of the Ray call ``ref``, awaited on asyncio or trio.

    Raises:
        WorkerLost: The worker died or cannot be reached.
        Exception: The call's own error, as Ray raises it.
    """
    import ray.exceptions

    wake = Wakeup()
    future: Future[Any] = ref.future()
    future.add_done_callback(lambda _f: wake.set())
    await wake.wait()
    try:
        return future.result()
    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
        raise WorkerLost(str(exc)) from exc

"""Supervise hypercorn's trio worker processes, restarting those that die.

``hypercorn.run.run`` stops every worker as soon as one exits and returns
(``deepactors serve`` then exited 0), so one killed worker took the whole
server down. This supervisor starts the workers the way hypercorn does (the
parent binds the sockets and passes them to spawned processes running
``trio_worker``) but, like uvicorn's, replaces a worker that dies while the
others keep serving, and gives up (exit status 1) when workers keep dying.
"""

from __future__ import annotations

import signal
import time
from collections import deque
from multiprocessing import get_context
from multiprocessing.connection import wait
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from types import FrameType

from hypercorn.config import Config, Sockets
from hypercorn.trio.run import trio_worker

from .._core.logs import get_logger

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW", "supervise"]

MAX_RESTARTS = 5
"""Restarts allowed within :data:`RESTART_WINDOW`; one more death and the server
gives up, since a worker that keeps dying (a crash at startup, memory exhausted)
would otherwise be restarted forever."""
RESTART_WINDOW = 60.0
"""Seconds over which :data:`MAX_RESTARTS` is counted."""
_POLL_SECONDS = 0.2
"""How often the wait for a worker's death wakes up to notice a shutdown signal."""
_STOP_SECONDS = 5.0
"""How long workers get beyond hypercorn's ``graceful_timeout`` to exit once asked,
before they are terminated."""

_log = get_logger("deepactors.server")


class _Supervisor:
    """Keeps ``config.workers`` trio workers running on the sockets bound here."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._ctx: SpawnContext = get_context("spawn")
        # Workers poll it (hypercorn's shutdown trigger) and shut down gracefully.
        self._shutdown: Event = self._ctx.Event()
        self._sockets: Sockets = config.create_sockets()
        self._workers: list[BaseProcess] = []
        self._restarts: deque[float] = deque()
        self._stopping = False

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM (0) or until workers die too often (1)."""
        try:
            # Workers inherit the ignored SIGINT (as in hypercorn): a Ctrl-C sent to
            # the whole process group reaches them through the shutdown event only.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for _ in range(self._config.workers):
                self._start()
            signal.signal(signal.SIGINT, self._on_signal)
            signal.signal(signal.SIGTERM, self._on_signal)
            return self._watch()
        finally:
            self._stop()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stopping = True

    def _start(self) -> None:
        process = self._ctx.Process(
            target=trio_worker,
            kwargs={
                "config": self._config,
                "shutdown_event": self._shutdown,
                "sockets": self._sockets,
            },
        )
        process.start()
        self._workers.append(process)

    def _watch(self) -> int:
        while not self._stopping:
            # A timeout, since a signal handler cannot interrupt the wait itself.
            wait([worker.sentinel for worker in self._workers], timeout=_POLL_SECONDS)
            if self._stopping:
                break
            for worker in [w for w in self._workers if w.exitcode is not None]:
                worker.join()
                self._workers.remove(worker)
                _log.warning("worker died", pid=worker.pid, exitcode=worker.exitcode)
                if not self._may_restart():
                    _log.error(
                        "workers keep dying: giving up",
                        restarts=len(self._restarts),
                        window_seconds=RESTART_WINDOW,
                    )
                    return 1
                self._start()
        return 0

    def _may_restart(self) -> bool:
        now = time.monotonic()
        while self._restarts and now - self._restarts[0] > RESTART_WINDOW:
            self._restarts.popleft()
        if len(self._restarts) >= MAX_RESTARTS:
            return False
        self._restarts.append(now)
        return True

    def _stop(self) -> None:
        self._shutdown.set()
        deadline = time.monotonic() + self._config.graceful_timeout + _STOP_SECONDS
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        for worker in self._workers:
            if worker.exitcode is None:
                worker.kill()
                worker.join()
        self._workers.clear()
        for sock in (*self._sockets.secure_sockets, *self._sockets.insecure_sockets):
            sock.close()


def supervise(config: Config) -> int:
    """Run ``config.workers`` hypercorn trio workers, replacing any that dies.

    Args:
        config: Hypercorn's config, with ``application_path`` and ``workers`` set.

    Returns:
        The exit status: 0 after SIGINT or SIGTERM (all workers stopped), 1 when
        more than :data:`MAX_RESTARTS` workers died within :data:`RESTART_WINDOW`.
    """
    return _Supervisor(config).run()

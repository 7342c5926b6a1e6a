"""The scheduler: fires each cron's runs when they are due, as the cron's creator.

One task per server process. Each pass reads the book (so crons made or changed
through another process are seen within :data:`POLL` seconds), fires what is
due, and sleeps until the next firing or the next pass. A firing is made by the
process that claims it (:meth:`CronBook.claim`), so with several processes on
one database each tick runs once.

**Missed firings.** A cron whose firings fell while no server ran (or while the
server was too busy to start them on time) fires **once** when it is next seen,
for the latest of them, then goes on from the present: a nightly report after a
weekend's downtime runs once, not three times. A firing more than
:data:`MAX_LATE` seconds late is skipped instead (it is logged), so a cron
re-enabled after months does not fire for a tick long gone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import final

import anyio
from anyio.abc import TaskStatus
from starlette.exceptions import HTTPException

from ..._core.logs import get_logger
from ...errors import DeepActorsError
from .._authz import CALLER
from .._records import iso
from .._runs import RunManager
from .._runs_api import thread_of
from .._schemas import RunCreate
from ..auth import Auth, Identity
from ._books import CronBook
from ._model import Cron, load_croniter

__all__ = ["MAX_LATE", "POLL", "Scheduler"]

_log = get_logger("deepactors.server")

POLL = 1.0
"""Seconds between two reads of the book when nothing is due sooner."""

MAX_LATE = 24 * 3600.0
"""Seconds late past which a firing is skipped rather than made."""


@final
class Scheduler:
    """Fires the crons of ``book`` through the run manager.

    Args:
        book: Where the crons are.
        manager: The app's run manager (``_runs.RunManager``).
        auth: The app's authentication: a cron's runs act for its creator.
    """

    def __init__(self, book: CronBook, manager: RunManager, auth: Auth | None) -> None:
        self.book = book
        self.manager = manager
        self.auth = auth
        # Firings another process claimed: not asked about again until the book moves on.
        self._taken: set[tuple[str, float]] = set()
        self.wake = anyio.Event()

    def changed(self) -> None:
        """A cron was made or changed here: look at the book now, not after the sleep."""
        self.wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Fire due crons until cancelled."""
        task_status.started()
        while True:
            soonest = time.time() + POLL
            try:
                crons = await self.book.all()
            except DeepActorsError as exc:
                _log.warning("crons not read", error=str(exc))
                crons = []
            if crons:
                await load_croniter()  # crons kept from before: their next firings need it
            now = time.time()
            for cron in crons:
                due = cron.next_run
                if not cron.enabled or due is None:
                    continue
                if due <= now:
                    await self._fire(cron, due, now)
                else:
                    soonest = min(soonest, due)
            self._taken = {t for t in self._taken if t[1] > now - MAX_LATE}
            if self.wake.is_set():
                self.wake = anyio.Event()
                continue
            with anyio.move_on_after(max(0.0, soonest - time.time())):
                await self.wake.wait()
            if self.wake.is_set():
                self.wake = anyio.Event()

    async def _fire(self, cron: Cron, tick: float, now: float) -> None:
        if (cron.cron_id, tick) in self._taken:
            return
        try:
            if not await self.book.claim(cron.cron_id, tick):
                self._taken.add((cron.cron_id, tick))
                return
            if now - tick <= MAX_LATE:
                await self._start(cron, tick)
            else:
                _log.warning("cron firing skipped: too late", cron_id=cron.cron_id, late=now - tick)
            # The next firing after the present: missed ones are not made up.
            cron.schedule_from(max(tick, now))
            await self.book.advance(cron.cron_id, tick, cron.next_run)
        except DeepActorsError as exc:
            _log.warning("cron not fired", cron_id=cron.cron_id, error=str(exc))

    async def _start(self, cron: Cron, tick: float) -> None:
        """Start the cron's run, acting for its creator."""
        token = None
        if self.auth is not None and cron.owner is not None:
            # The identity as the cron's creation stored it (Identity checks its id).
            owner_id, permissions = cron.owner["id"], cron.owner.get("permissions", ())
            metadata = cron.owner.get("metadata")
            identity = Identity(
                id=owner_id if isinstance(owner_id, str) else "",
                permissions=frozenset(permissions if isinstance(permissions, list) else ()),
                metadata=metadata if isinstance(metadata, dict) else {},
            )
            token = CALLER.set((self.auth, identity))
        try:
            body = RunCreate.model_validate(
                {
                    **cron.payload,
                    "assistant_id": cron.assistant_id,
                    "on_completion": cron.on_run_completed if cron.thread_id is None else None,
                    "metadata": {
                        **_metadata(cron.payload),
                        "cron_id": cron.cron_id,
                        "cron_tick": iso(tick),
                    },
                }
            )
            # The endpoints' own road to a run's thread, then to the run.
            thread = await thread_of(self.manager, cron.thread_id, body)
            await self.manager.create(thread, body)
        except HTTPException as exc:
            # The thread was deleted, the assistant is gone...: said, and the cron goes on.
            _log.warning("cron run not started", cron_id=cron.cron_id, error=str(exc.detail))
        finally:
            if token is not None:
                CALLER.reset(token)


def _metadata(payload: Mapping[str, object]) -> dict[str, object]:
    """The metadata a cron's runs are made with (its payload's, if any)."""
    given = payload.get("metadata")
    return given if isinstance(given, dict) else {}

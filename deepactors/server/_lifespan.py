"""The app's lifespan: the runtime, the run manager and the tasks that serve the runs.

``create_app`` checks its options and builds the app; what the app opens when it
starts (sandboxes, the runtime, the relay, the run manager, the cron scheduler,
the sweeps) and closes, in order, when it stops is here, with the relay the
options name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskStatus
from starlette.applications import Starlette

from ..actors import open_runtime
from ..errors import ConfigurationError
from ..persistence import Store
from ..persistence.ttl import ExpiringStore
from ._guard import Guard
from ._options import AppSettings
from ._records import AssistantRecord
from ._runs import RunManager
from ._sandboxes import open_sandboxes
from ._thread_lookup import metadata_beside
from .auth import Auth
from .crons import CronBook, Scheduler
from .relay import FOLLOW_PATIENCE, LocalRelay, RunRelay, patience, pg_relay
from .webhooks import Webhooks

__all__ = ["AppLifespan", "open_relay"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AppLifespan:
    """The app's lifespan: what it opens for the runs, and how it closes them.

    Given to Starlette as ``lifespan``; each field is one of ``create_app``'s
    parts or its checked options (``settings``), checked there before the app
    is made.
    """

    assistants: dict[str, AssistantRecord]
    guard: Guard
    auth: Auth | None
    store: Store
    crons: CronBook
    webhooks: Webhooks | None
    runs_db: str | None
    settings: AppSettings

    @asynccontextmanager
    async def __call__(self, app: Starlette) -> AsyncIterator[None]:
        settings = self.settings
        async with (
            open_sandboxes(record.agent for record in self.assistants.values()),
            open_runtime(
                idle_timeout=settings.idle_timeout,
                pacing=settings.pacing,
                defer_gc=settings.defer_gc,
                tracing=settings.tracing,
            ) as runtime,
            anyio.create_task_group() as tg,
        ):
            relay = open_relay(self.runs_db, settings.runs_db_patience)
            # Threads' metadata (owners) beside their checkpoints: the runs
            # database keeps it when there is one.
            savers = (record.agent.checkpointer for record in self.assistants.values())
            kept = None if relay.shared else metadata_beside(c for c in savers if c is not None)
            manager = RunManager(
                runtime,
                tg,
                self.assistants,
                relay=relay,
                run_retention=settings.run_retention,
                stream_log_bytes=settings.stream_log_bytes,
                webhooks=self.webhooks,
                max_runs_per_client=settings.max_runs_per_client,
                thread_metadata=kept,
                thread_ttl=settings.thread_ttl,
            )
            relay_scope, bodies_scope = anyio.CancelScope(), anyio.CancelScope()
            tg.start_soon(_expire_bodies, self.guard, bodies_scope)
            if relay.shared:
                await tg.start(_run_relay, relay, manager, relay_scope)
            await manager.load_saved()
            scheduler = Scheduler(self.crons, manager, self.auth)
            app.state.scheduler = scheduler
            app.state.crons = self.crons
            await tg.start(scheduler.run)
            if isinstance(self.store, ExpiringStore):
                tg.start_soon(self.store.sweep_forever)
            app.state.runs = manager
            app.state.serving = True
            try:
                yield
            finally:
                # /ok (liveness) answers 503 from here on: shutting down, or
                # failed (a task of this group raised), the app no longer serves.
                app.state.serving = False
                # Shutdown: every run is cancelled (its whole subtree) and
                # waited for before the runtime closes; what they reported is
                # written before the relay lets go of its database.
                with anyio.CancelScope(shield=True):
                    await manager.aclose()
                    await relay.aclose()
                    if kept is not None:
                        await kept.aclose()
                relay_scope.cancel()
                bodies_scope.cancel()
                tg.cancel_scope.cancel()  # the scheduler: the runs are done
                with anyio.CancelScope(shield=True):
                    await self.crons.aclose()


def open_relay(runs_db: str | None, follow_patience: float = FOLLOW_PATIENCE) -> RunRelay:
    """The relay for ``runs_db`` (a PostgreSQL DSN), or the local one when None.

    ``follow_patience``: seconds the PostgreSQL relay follows another process's
    run while the database is unreachable (checked with or without ``runs_db``).

    Raises:
        ConfigurationError: ``runs_db`` is not PostgreSQL, psycopg is missing, or
            ``follow_patience`` is not a number of seconds > 0.
    """
    follow_patience = patience(follow_patience)
    if runs_db is None:
        return LocalRelay()
    if not runs_db.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(f"runs are shared through PostgreSQL, not {runs_db!r}")
    try:
        # psycopg is an optional dependency (the [postgres] extra): imported only
        # when runs are shared, so a single-process server never needs it.
        relay = pg_relay()
    except ImportError as exc:
        raise ConfigurationError(
            "sharing runs through PostgreSQL needs psycopg: "
            f"pip install 'deepactors[postgres]' ({exc})"
        ) from exc
    return relay(runs_db, follow_patience=follow_patience)


async def _expire_bodies(guard: Guard, scope: anyio.CancelScope) -> None:
    with scope:
        await guard.expire_bodies()


async def _run_relay(
    relay: RunRelay,
    manager: RunManager,
    scope: anyio.CancelScope,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with scope:
        await relay.serve(manager.cancel_requested, task_status=task_status)

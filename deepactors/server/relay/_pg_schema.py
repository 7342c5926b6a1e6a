"""The PostgreSQL tables of the shared run registry (see ``_pg_relay``), and their rows."""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import Jsonb

from ...errors import ConfigurationError
from ._relay import SharedRun

__all__ = [
    "LOST",
    "MARK_LOST",
    "RELAY_SCHEMA_VERSION",
    "RUN_COLUMNS",
    "SCHEMA",
    "check_version",
    "jsonb",
    "shared_run",
]

RELAY_SCHEMA_VERSION = 1
"""The version of these tables; a database made by another version is refused."""

SCHEMA = [
    "SELECT pg_advisory_xact_lock(7340238921)",
    """CREATE TABLE IF NOT EXISTS deepactors_runs (
        run_id text PRIMARY KEY, thread_id text NOT NULL, graph_id text NOT NULL,
        status text NOT NULL, metadata jsonb NOT NULL, kwargs jsonb NOT NULL,
        multitask_strategy text NOT NULL, result jsonb,
        owner_pid integer NOT NULL, owner_start timestamptz NOT NULL,
        created_at double precision NOT NULL, updated_at double precision NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS deepactors_runs_thread ON deepactors_runs (thread_id)",
    """CREATE TABLE IF NOT EXISTS deepactors_threads (
        thread_id text PRIMARY KEY, metadata jsonb NOT NULL,
        created_at double precision NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS deepactors_run_watches (
        run_id text NOT NULL, watch_id text NOT NULL, modes jsonb NOT NULL,
        subgraphs boolean NOT NULL, PRIMARY KEY (run_id, watch_id))""",
    """CREATE TABLE IF NOT EXISTS deepactors_run_events (
        run_id text NOT NULL, seq integer NOT NULL, watch_id text NOT NULL,
        frame text NOT NULL, PRIMARY KEY (run_id, seq))""",
    # A resumable run's frames by id (``_pg_log``); a NULL frame ends the log.
    """CREATE TABLE IF NOT EXISTS deepactors_run_log (
        run_id text NOT NULL, n integer NOT NULL, frame text, PRIMARY KEY (run_id, n))""",
    "CREATE TABLE IF NOT EXISTS deepactors_relay_schema (version integer NOT NULL)",
    f"""INSERT INTO deepactors_relay_schema (version)
        SELECT {RELAY_SCHEMA_VERSION} WHERE NOT EXISTS (SELECT 1 FROM deepactors_relay_schema)""",
    "SELECT version FROM deepactors_relay_schema",
]
"""Made in one transaction, under an advisory lock, so processes starting
together do not race on ``CREATE``; returns the stored version."""
RUN_COLUMNS = (
    "run_id, thread_id, graph_id, status, metadata, kwargs, multitask_strategy,"
    " created_at, updated_at, result"
)
LOST = {"__error__": {"error": "WorkerLost", "message": "the server process running it died"}}
# A run whose owner's LISTEN connection is gone is lost: marked so in one statement.
MARK_LOST = """UPDATE deepactors_runs r SET status = 'error', result = %s, updated_at = %s
    WHERE status IN ('pending', 'running') AND {where} AND NOT EXISTS (
        SELECT 1 FROM pg_stat_activity a
        WHERE a.pid = r.owner_pid AND a.backend_start = r.owner_start)"""


def jsonb(value: Any) -> Jsonb:
    """A JSON value as a ``jsonb`` parameter (what JSON cannot encode is its ``repr``)."""
    return Jsonb(value, dumps=lambda v: json.dumps(v, default=repr))


def shared_run(row: tuple[Any, ...]) -> SharedRun:
    """A ``deepactors_runs`` row (:data:`RUN_COLUMNS`) as a :class:`SharedRun`."""
    run_id, thread_id, graph_id, status, metadata, kwargs, strategy, created, updated, result = row
    return SharedRun(
        run_id=run_id,
        thread_id=thread_id,
        graph_id=graph_id,
        status=status,
        metadata=metadata,
        kwargs=kwargs,
        multitask_strategy=strategy,
        created_at=created,
        updated_at=updated,
        result=result,
    )


def check_version(rows: list[tuple[Any, ...]]) -> None:
    """Refuse a database whose tables another version of deepactors made.

    Raises:
        ConfigurationError: The stored version is not :data:`RELAY_SCHEMA_VERSION`.
    """
    stored = rows[0][0] if rows else None
    if stored != RELAY_SCHEMA_VERSION:
        raise ConfigurationError(
            f"the runs database holds deepactors_runs of schema version {stored}, "
            f"this server uses version {RELAY_SCHEMA_VERSION}"
        )

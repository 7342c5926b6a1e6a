"""Runs shared between server processes, and streams a client can rejoin.

A single process keeps its runs in memory (:class:`LocalRelay`). With
``--runs-db`` several processes share one PostgreSQL database of runs
(``PgRelay``, loaded by :func:`pg_relay` since it needs psycopg): each process
learns of the others' runs and threads (:class:`SharedRuns`), follows their
events, and cancels them. A resumable stream keeps its SSE frames
(:class:`FrameLog`) so a client that lost its connection joins again where it
left off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._backoff import FOLLOW_PATIENCE as FOLLOW_PATIENCE
from ._backoff import backoff as backoff
from ._backoff import patience as patience
from ._frame_log import DEFAULT_STREAM_LOG_BYTES as DEFAULT_STREAM_LOG_BYTES
from ._frame_log import FrameLog as FrameLog
from ._frame_log import dropped_error as dropped_error
from ._relay import LocalRelay as LocalRelay
from ._relay import RunRelay as RunRelay
from ._shared_runs import SharedRuns as SharedRuns

if TYPE_CHECKING:
    from ._pg_relay import PgRelay


def pg_relay() -> type[PgRelay]:
    """The PostgreSQL relay class (imports psycopg, the ``postgres`` extra)."""
    from ._pg_relay import PgRelay

    return PgRelay


__all__ = [
    "DEFAULT_STREAM_LOG_BYTES",
    "FOLLOW_PATIENCE",
    "FrameLog",
    "LocalRelay",
    "RunRelay",
    "SharedRuns",
    "backoff",
    "dropped_error",
    "patience",
    "pg_relay",
]

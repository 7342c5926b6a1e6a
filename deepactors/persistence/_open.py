"""Open a checkpointer or store from one string: a SQLite file or a PostgreSQL URL.

What the CLI's ``--db`` and ``create_deep_agent``'s callers pass: a path means a
SQLite file, a ``postgresql://`` (or ``postgres://``) URL a PostgreSQL database.
"""

from __future__ import annotations

import os
from typing import Any

from ._checkpoint import Checkpointer
from .postgres import postgres_checkpointer, postgres_store
from .sqlite import SqliteCheckpointer, SqliteStore
from .store import Store

__all__ = ["is_postgres_url", "open_checkpointer", "open_store"]

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.lower().startswith(_SCHEMES)


def open_checkpointer(target: str | os.PathLike[str], **options: Any) -> Checkpointer:
    """A checkpointer on ``target``: :class:`PostgresCheckpointer` for a
    ``postgresql://`` URL, else :class:`SqliteCheckpointer` on that file.

    Nothing is opened until first use. ``options`` go to the class (both take
    ``when_busy`` and ``clock``).

    Raises:
        ImportError: A PostgreSQL URL, and psycopg is not installed.
    """
    if is_postgres_url(target):
        checkpointer: Checkpointer = postgres_checkpointer(os.fspath(target), **options)
        return checkpointer
    return SqliteCheckpointer(target, **options)


def open_store(target: str | os.PathLike[str], **options: Any) -> Store:
    """A store on ``target``, as :func:`open_checkpointer` chooses.

    Raises:
        ImportError: A PostgreSQL URL, and psycopg is not installed.
    """
    if is_postgres_url(target):
        store: Store = postgres_store(os.fspath(target), **options)
        return store
    return SqliteStore(target, **options)

"""The PostgreSQL classes, loaded only when asked for: psycopg is an optional extra.

``deepactors.persistence`` must import without psycopg (it is the ``[postgres]``
extra, not a dependency), so the PostgreSQL modules are imported here on first
use, not at package import. This is not a way round an import circle: nothing
in ``_pg_*`` imports back up; it is the one place an optional dependency is met,
and it says how to get it when it is missing.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["POSTGRES_NAMES", "load", "postgres_checkpointer", "postgres_store"]

# Public name -> the module that defines it.
POSTGRES_NAMES = {
    "PostgresCheckpointer": "deepactors.persistence._pg_checkpoint",
    "PostgresStore": "deepactors.persistence._pg_store",
    "PG_CHECKPOINT_SCHEMA_VERSION": "deepactors.persistence._pg_records",
    "PG_STORE_SCHEMA_VERSION": "deepactors.persistence._pg_store",
}

_MISSING = "{name} needs psycopg 3, which is not installed: pip install 'deepactors[postgres]'"


def load(name: str) -> Any:
    """The PostgreSQL class or constant ``name`` (one of :data:`POSTGRES_NAMES`).

    Raises:
        ImportError: psycopg (or its pool) is not installed; the message says
            how to install it.
    """
    try:
        module = importlib.import_module(POSTGRES_NAMES[name])
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(_MISSING.format(name=name), name=exc.name) from exc
        raise
    return getattr(module, name)


def postgres_checkpointer(dsn: str, **options: Any) -> Any:
    """``PostgresCheckpointer(dsn, **options)``; ImportError without psycopg."""
    return load("PostgresCheckpointer")(dsn, **options)


def postgres_store(dsn: str, **options: Any) -> Any:
    """``PostgresStore(dsn, **options)``; ImportError without psycopg."""
    return load("PostgresStore")(dsn, **options)

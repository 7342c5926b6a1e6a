"""PostgreSQL checkpointer, store and building blocks; psycopg is an optional extra.

``deepactors.persistence`` must import without psycopg (it is the ``[postgres]``
extra, not a dependency), so this package imports nothing of psycopg itself: its
modules are imported on first use of a name (:func:`load`, or the module's
``__getattr__``), not at package import. This is not a way round an import
circle: nothing here imports back up; it is the one place an optional dependency
is met, and it says how to get it when it is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["POSTGRES_NAMES", "load", "postgres_checkpointer", "postgres_store"]

if TYPE_CHECKING:
    from ._checkpoint import PostgresCheckpointer as PostgresCheckpointer
    from ._conn import PgDatabase as PgDatabase
    from ._conn import PgErrors as PgErrors
    from ._records import PG_CHECKPOINT_SCHEMA_VERSION as PG_CHECKPOINT_SCHEMA_VERSION
    from ._sql import Migration as Migration
    from ._sql import Op as Op
    from ._sql import Result as Result
    from ._sql import Stmt as Stmt
    from ._sql import prepare_schema as prepare_schema
    from ._store import PG_STORE_SCHEMA_VERSION as PG_STORE_SCHEMA_VERSION
    from ._store import PostgresStore as PostgresStore

# Public name -> the module that defines it.
POSTGRES_NAMES = {
    "PostgresCheckpointer": "deepactors.persistence.postgres._checkpoint",
    "PostgresStore": "deepactors.persistence.postgres._store",
    "PG_CHECKPOINT_SCHEMA_VERSION": "deepactors.persistence.postgres._records",
    "PG_STORE_SCHEMA_VERSION": "deepactors.persistence.postgres._store",
}
# The building blocks the server's runs relay shares (deepactors.persistence.pgsql).
_BLOCKS = {
    "PgDatabase": "deepactors.persistence.postgres._conn",
    "PgErrors": "deepactors.persistence.postgres._conn",
    "Op": "deepactors.persistence.postgres._sql",
    "Result": "deepactors.persistence.postgres._sql",
    "Stmt": "deepactors.persistence.postgres._sql",
    "Migration": "deepactors.persistence.postgres._sql",
    "prepare_schema": "deepactors.persistence.postgres._sql",
}

_MISSING = "{name} needs psycopg 3, which is not installed: pip install 'deepactors[postgres]'"


def load(name: str) -> Any:
    """The PostgreSQL class or constant ``name`` (one of :data:`POSTGRES_NAMES`).

    Raises:
        ImportError: psycopg (or its pool) is not installed; the message says
            how to install it.
    """
    try:
        module = importlib.import_module(POSTGRES_NAMES.get(name) or _BLOCKS[name])
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


def __getattr__(name: str) -> object:
    if name in POSTGRES_NAMES or name in _BLOCKS:
        return load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

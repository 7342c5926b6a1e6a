"""The PostgreSQL checkpointer's and store's SQL, written once for both drivers.

Each operation is a generator that yields statements (:class:`Stmt`) and is sent
their results (:class:`Result`); it returns the operation's value. A driver
(``_conn``) runs it: on asyncio through psycopg's ``AsyncConnection``, on
trio through a sync ``Connection`` in a worker thread, the whole operation in
one thread hop. So the SQL, the numbering of records and the checks of what is
read exist once, whatever the loop.

Schema and migrations
---------------------
``deepactors_migrations`` has one row per version of a component (``checkpoints``,
``store``) applied to the database. Preparing takes a transaction-level advisory
lock first, so processes starting together create or upgrade the tables once;
a database whose newest version is above the code's is refused
(:class:`~deepactors.errors.CheckpointSchemaMismatch` naming both versions).
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...errors import PersistenceError

__all__ = [
    "MIGRATIONS_LOCK",
    "Migration",
    "Op",
    "Result",
    "Stmt",
    "check_no_nul",
    "lock_key",
    "prepare_schema",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Stmt:
    """One statement: ``sql`` with ``%s`` placeholders and its parameters.

    ``params`` may be a dict for ``%(name)s`` placeholders. With ``many``, it
    is a sequence of parameter tuples (``executemany``).
    """

    sql: str
    params: Sequence[Any] | Mapping[str, Any] = ()
    many: bool = False


@dataclass(frozen=True, slots=True)
class Result:
    """What a statement gave back: its rows (if it returns any) and its row count."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    rowcount: int = 0


Op = Generator[Stmt, Result, T]
"""An operation: yields statements, is sent their results, returns its value."""


def lock_key(kind: str, name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` in ``kind``'s key space.

    A hash, so two names may share a key: their holders then wait for each
    other, which is slower but never wrong (one run holds one thread at a time).
    """
    digest = hashlib.blake2b(f"deepactors/{kind}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


MIGRATIONS_LOCK = lock_key("schema", "migrations")
"""Serialises creating and upgrading the tables across processes."""


def check_no_nul(text: str, *, what: str) -> str:
    """Refuse a NUL character, which a PostgreSQL ``text`` value cannot hold.

    Stored JSON escapes it (``\\u0000``); only identifiers (thread ids, paths,
    kinds, keys, namespace parts) are stored raw.

    Raises:
        ValueError: ``text`` holds ``"\\x00"``.
    """
    if "\x00" in text:
        raise ValueError(f"{what} {text!r} holds a NUL character, which PostgreSQL cannot store")
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One component's tables, versioned in ``deepactors_migrations``.

    Attributes:
        component: Its name there (``"checkpoints"``, ``"store"``).
        version: The version this code reads and writes.
        ddl: Creates the current version in a database that has none of it.
        upgrades: For an older version ``v``, the statements that bring it to ``v + 1``.
        mismatch: The error for a version this code cannot use.
    """

    component: str
    version: int
    ddl: Sequence[str]
    upgrades: Mapping[int, Sequence[str]] = field(default_factory=dict)
    mismatch: type[PersistenceError]


_MIGRATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS deepactors_migrations ("
    " component text NOT NULL, version integer NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (component, version))"
)


def prepare_schema(migration: Migration, location: str) -> Op[None]:
    """Create, upgrade or check one component's tables (inside one transaction)."""
    yield Stmt("SELECT pg_advisory_xact_lock(%s)", (MIGRATIONS_LOCK,))
    yield Stmt(_MIGRATIONS_DDL)
    found = (
        yield Stmt(
            "SELECT max(version) FROM deepactors_migrations WHERE component = %s",
            (migration.component,),
        )
    ).rows[0][0]
    if found == migration.version:
        return
    if found is None:
        for statement in migration.ddl:
            yield Stmt(statement)
        yield Stmt(
            "INSERT INTO deepactors_migrations (component, version) VALUES (%s, %s)",
            (migration.component, migration.version),
        )
        return
    steps = range(found, migration.version)
    if not steps or any(v not in migration.upgrades for v in steps):
        newer = " (written by a newer deepactors: upgrade it)" if found > migration.version else ""
        raise migration.mismatch(
            f"{location}: its {migration.component} schema is version {found}{newer}, "
            f"but this version of deepactors reads and writes version {migration.version}"
        )
    for version in steps:
        for statement in migration.upgrades[version]:
            yield Stmt(statement)
        yield Stmt(
            "INSERT INTO deepactors_migrations (component, version) VALUES (%s, %s)",
            (migration.component, version + 1),
        )

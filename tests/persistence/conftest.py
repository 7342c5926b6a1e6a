"""Fixtures: every kind of checkpointer and store under one conformance suite.

A kind of storage (:class:`Kind`) says how to make its checkpointers and stores,
on fresh storage per test, and, for durable kinds, how to damage what is stored
from outside (:class:`Tamper`), as a broken disk or a careless hand would. The
suites take ``checkpointer`` / ``store`` (or ``make_checkpointer`` /
``make_store`` for options such as a clock) and so run over every kind; the
damage tests take ``durable`` and run over the kinds that have a ``tamper``.
Each kind gets its storage as a ``Where``: this test's ``tmp_path`` for SQLite,
a fresh database's DSN for PostgreSQL (started once per session, and only when
a PostgreSQL test runs).

Every test here also runs under blockbuster, scanning ``deepactors``: a blocking
call (SQLite, file I/O) made on the event-loop thread fails the test. Its probe
for "is a loop running here" is widened to trio, as in ``tests/backends``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread
import psycopg
import pytest

from deepactors.persistence import (
    Checkpointer,
    MemoryCheckpointer,
    MemoryStore,
    PostgresCheckpointer,
    PostgresStore,
    SqliteCheckpointer,
    SqliteStore,
    Store,
)


class Tamper(Protocol):
    """Changes stored checkpoint records behind the checkpointer's back (blocking)."""

    def delete_record(self, thread_id: str, seq: int) -> None: ...

    def set_field(self, thread_id: str, seq: int, field: str, value: object) -> None:
        """Store ``value`` (bytes are stored as a blob) in one field of one record."""
        ...


# Where a kind keeps its data: a folder (SQLite, memory) or a database's DSN.
Where = Any


@dataclass(frozen=True)
class Kind:
    """A kind of storage under test."""

    name: str
    checkpointer: Callable[[Where, dict[str, Any]], Checkpointer]
    store: Callable[[Where, dict[str, Any]], Store]
    tamper: Callable[[Where], Tamper] | None = None
    postgres: bool = False


class SqliteTamper:
    def __init__(self, file: Path) -> None:
        self.file = file

    def _execute(self, sql: str, params: tuple[object, ...]) -> None:
        with closing(sqlite3.connect(self.file, isolation_level=None)) as raw:
            raw.execute(sql, params)

    def delete_record(self, thread_id: str, seq: int) -> None:
        self._execute(
            "DELETE FROM checkpoint_records WHERE thread_id = ? AND seq = ?", (thread_id, seq)
        )

    def set_field(self, thread_id: str, seq: int, field: str, value: object) -> None:
        assert field in {"seq", "path", "step", "kind", "created_at", "data"}
        self._execute(
            f"UPDATE checkpoint_records SET {field} = ? WHERE thread_id = ? AND seq = ?",
            (value, thread_id, seq),
        )


class PostgresTamper:
    """Damage what PostgreSQL's column types can hold (text that is not JSON...).

    The rest (bytes that are not UTF-8, a seq that is not a number) cannot be
    stored in a ``text`` or ``bigint`` column at all: those cases are skipped.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def _execute(self, sql: str, params: tuple[object, ...]) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql, params)

    def delete_record(self, thread_id: str, seq: int) -> None:
        self._execute(
            "DELETE FROM checkpoint_records WHERE thread_id = %s AND seq = %s", (thread_id, seq)
        )

    def set_field(self, thread_id: str, seq: int, field: str, value: object) -> None:
        text_columns = {"path", "kind", "data"}
        if not (field in text_columns and isinstance(value, str)):
            pytest.skip(f"a PostgreSQL column cannot hold {field}={type(value).__name__}")
        self._execute(
            f"UPDATE checkpoint_records SET {field} = %s WHERE thread_id = %s AND seq = %s",
            (value, thread_id, seq),
        )


KINDS = [
    Kind("memory", lambda _, opts: MemoryCheckpointer(**opts), lambda _, opts: MemoryStore(**opts)),
    Kind(
        "sqlite",
        lambda dir, opts: SqliteCheckpointer(dir / "nested" / "checkpoints.db", **opts),
        lambda dir, opts: SqliteStore(dir / "store.db", **opts),
        lambda dir: SqliteTamper(dir / "nested" / "checkpoints.db"),
    ),
    Kind(
        "postgres",
        lambda dsn, opts: PostgresCheckpointer(dsn, **opts),
        lambda dsn, opts: PostgresStore(dsn, **opts),
        PostgresTamper,
        postgres=True,
    ),
]


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""


@pytest.fixture(params=KINDS, ids=lambda kind: kind.name)
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


def where(kind: Kind, request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    """The kind's storage for this test (a fresh PostgreSQL database when it needs one)."""
    return request.getfixturevalue("postgres_dsn") if kind.postgres else tmp_path


@pytest.fixture
def storage(kind: Kind, request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    return where(kind, request, tmp_path)


@pytest.fixture
def make_checkpointer(kind: Kind, storage: Where) -> Callable[..., Checkpointer]:
    """Checkpointers of the kind on this test's storage, with options (``clock=``...).

    Durable kinds share the storage between the objects made here; a memory
    checkpointer is its own storage.
    """
    return lambda **options: kind.checkpointer(storage, options)


@pytest.fixture
async def checkpointer(
    make_checkpointer: Callable[..., Checkpointer],
) -> AsyncIterator[Checkpointer]:
    async with make_checkpointer() as cp:
        yield cp


@pytest.fixture
def make_store(kind: Kind, storage: Where) -> Callable[..., Store]:
    """A store of the kind on this test's storage, with options (``clock=``)."""
    return lambda **options: kind.store(storage, options)


@pytest.fixture
async def store(make_store: Callable[..., Store]) -> AsyncIterator[Store]:
    made = make_store()
    yield made
    aclose = getattr(made, "aclose", None)
    if aclose is not None:
        await aclose()


@dataclass(frozen=True)
class Durable:
    """A durable checkpointer and the means to damage its storage."""

    checkpointer: Checkpointer
    tamper: Tamper

    async def delete_record(self, thread_id: str, seq: int) -> None:
        await self.checkpointer.aclose()  # damage from outside, between connections
        await anyio.to_thread.run_sync(self.tamper.delete_record, thread_id, seq)

    async def set_field(self, thread_id: str, seq: int, field: str, value: object) -> None:
        await self.checkpointer.aclose()
        await anyio.to_thread.run_sync(self.tamper.set_field, thread_id, seq, field, value)


@pytest.fixture(params=[k for k in KINDS if k.tamper is not None], ids=lambda kind: kind.name)
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Durable]:
    kind: Kind = request.param
    assert kind.tamper is not None
    at = where(kind, request, tmp_path)
    async with kind.checkpointer(at, {}) as cp:
        yield Durable(cp, kind.tamper(at))


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()

"""``PostgresStore``: the namespaced key-value store in PostgreSQL.

Same connection handling as :class:`PostgresCheckpointer` (and it may share its
database); each call is one statement in autocommit. A namespace is stored as a
``text[]`` in the "C" collation, so arrays compare part by part, by code point,
exactly as Python compares tuples of strings: ``search`` is one range-free
prefix test and one ``ORDER BY``. Errors are the store's own
(:class:`~deepactors.errors.StoreError`, :class:`~deepactors.errors.StoreCorrupt`),
naming the database and the item, never quoting a stored value.
"""

from __future__ import annotations

import builtins
import functools
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import AsyncResource

from ...errors import ConfigurationError, StoreCorrupt, StoreError, StoreUnavailable
from .._json import decode_object
from ..store import (
    Namespace,
    StoreItem,
    check_key,
    check_namespace,
    check_namespace_prefix,
    encode_value,
)
from ._conn import PgDatabase, PgErrors, PoolWaits
from ._drive import DOWN_WAIT, OPEN_TIMEOUT, PROBE_AFTER
from ._sql import Migration, Op, Stmt, check_no_nul, prepare_schema

__all__ = ["PG_STORE_SCHEMA_VERSION", "PostgresStore"]

PG_STORE_SCHEMA_VERSION = 1
"""The version of the PostgreSQL store table this code writes and reads."""

_MIGRATION = Migration(
    component="store",
    version=PG_STORE_SCHEMA_VERSION,
    ddl=(
        """CREATE TABLE store_items (
            namespace  text[] COLLATE "C" NOT NULL,
            key        text COLLATE "C" NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            value      text NOT NULL,
            PRIMARY KEY (namespace, key)
        )""",
    ),
    mismatch=StoreCorrupt,
)

_SELECT = "SELECT namespace, key, created_at, updated_at, value FROM store_items"
# Decoded in a worker thread past this much JSON.
_DECODE_INLINE = 64 * 1024

Row = tuple[Any, ...]


def _rows(sql: str, params: tuple[object, ...]) -> Op[list[Row]]:
    return (yield Stmt(sql, params)).rows


def _execute(sql: str, params: tuple[object, ...]) -> Op[None]:
    yield Stmt(sql, params)


def _items(location: str, rows: list[Row]) -> list[StoreItem]:
    out: list[StoreItem] = []
    for ns, key, created_at, updated_at, value in rows:
        try:
            decoded = decode_object(value)
        except RecursionError:
            raise StoreCorrupt(
                f"{location}: store item {tuple(ns)} {key!r}: it is nested too deeply"
            ) from None
        except ValueError as exc:
            raise StoreCorrupt(
                f"{location}: store item {tuple(ns)} {key!r}: it cannot be decoded ({exc})"
            ) from None
        out.append(
            StoreItem(
                namespace=tuple(ns),
                key=key,
                value=decoded,
                created_at=created_at,
                updated_at=updated_at,
            )
        )
    return out


def _checked(namespace: Namespace, *keys: str) -> list[str]:
    for part in namespace:
        check_no_nul(part, what="a namespace part")
    for key in keys:
        check_no_nul(key, what="a store key")
    return list(namespace)


class PostgresStore(AsyncResource):
    """A :class:`~deepactors.persistence.Store` in a PostgreSQL database.

    The table (``store_items``) is created on first use; connections are
    pooled per event-loop run as :class:`PostgresCheckpointer`'s are.

    Args:
        dsn: A libpq connection string or URL.
        pool_size: Connections per event-loop run.
        clock: Wall-clock time for ``created_at`` / ``updated_at`` (``time.time``).
        checkout_timeout: Seconds a call waits in all for a pooled connection
            while every one is in use (30 by default); then it fails with
            :class:`~deepactors.errors.StoreUnavailable`, saying the pool is busy.
        down_wait: Seconds a call waits for a connection while the database is
            known to be down (1 by default), before it fails with
            :class:`~deepactors.errors.StoreUnavailable`.
        probe_after: Seconds a call waits for a pooled connection before it asks
            the server whether it is up (2 by default): the most an outage not
            yet known takes to be told.

    Raises:
        ConfigurationError: ``dsn`` cannot be read (at once).
        StoreError: On first use, when the database cannot be reached.
        StoreCorrupt: On first use, when it holds a store of an unknown schema version.
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 4,
        clock: Callable[[], float] = time.time,
        checkout_timeout: float = OPEN_TIMEOUT,
        down_wait: float = DOWN_WAIT,
        probe_after: float = PROBE_AFTER,
    ) -> None:
        if pool_size < 1:
            raise ConfigurationError("pool_size must be at least 1")
        waits = PoolWaits(checkout=checkout_timeout, down=down_wait, probe_after=probe_after)
        try:
            self._db = PgDatabase(
                dsn,
                prepare=functools.partial(prepare_schema, _MIGRATION),
                errors=PgErrors(
                    failed=StoreError, corrupt=StoreCorrupt, unavailable=StoreUnavailable
                ),
                pool_size=pool_size,
                lease_connections=1,
                waits=waits,
            )
        except ValueError as exc:
            raise ConfigurationError(f"PostgresStore: {exc}") from None
        self._clock = clock

    def __repr__(self) -> str:
        return f"PostgresStore({self._db.location!r})"

    @property
    def location(self) -> str:
        """The database, without credentials."""
        return self._db.location

    async def ping(self) -> None:
        """Check the database answers (one round trip), for a readiness probe.

        Raises:
            StoreError: It does not, naming it.
        """
        await self._db.ping()

    async def _select(self, sql: str, params: tuple[object, ...]) -> builtins.list[StoreItem]:
        rows = await self._db.run(_rows(sql, params), transaction=False)
        decode = functools.partial(_items, self._db.location, rows)
        if sum(len(row[4]) for row in rows) > _DECODE_INLINE:
            return await anyio.to_thread.run_sync(decode)
        return decode()

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        ns = _checked(check_namespace(namespace), check_key(key))
        items = await self._select(f"{_SELECT} WHERE namespace = %s AND key = %s", (ns, key))
        return items[0] if items else None

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """See :meth:`Store.put`."""
        ns = _checked(check_namespace(namespace), check_key(key))
        text = encode_value(key, value)
        now = self._clock()
        await self._db.run(
            _execute(
                "INSERT INTO store_items (namespace, key, created_at, updated_at, value)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, key) DO UPDATE"
                " SET value = excluded.value, updated_at = excluded.updated_at",
                (ns, key, now, now, text),
            ),
            transaction=False,
        )

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        ns = _checked(check_namespace(namespace), check_key(key))
        await self._db.run(
            _execute("DELETE FROM store_items WHERE namespace = %s AND key = %s", (ns, key)),
            transaction=False,
        )

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list`."""
        ns = _checked(check_namespace(namespace), check_key(prefix, what="a key prefix"))
        return await self._select(
            f"{_SELECT} WHERE namespace = %s AND starts_with(key, %s) ORDER BY key", (ns, prefix)
        )

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search`."""
        ns = _checked(
            check_namespace_prefix(namespace_prefix), check_key(key_prefix, what="a key prefix")
        )
        # The slice [1:0] of any array is empty: an empty prefix matches all.
        return await self._select(
            f"{_SELECT} WHERE namespace[1:%s] = %s::text[] AND starts_with(key, %s)"
            " ORDER BY namespace, key",
            (len(ns), ns, key_prefix),
        )

    async def aclose(self) -> None:
        """Close this event-loop run's pool now (idempotent, not final)."""
        await self._db.aclose()

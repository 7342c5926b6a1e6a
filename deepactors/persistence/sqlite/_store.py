"""``SqliteStore``: the namespaced key-value store in a SQLite file.

Same connection handling as the checkpointer (and it may share its file); each
call is one statement in autocommit. Its errors are the store's own
(:class:`~deepactors.errors.StoreError`, :class:`~deepactors.errors.StoreCorrupt`),
naming the file and the item, never quoting a stored value.

Each item carries a checksum of its fields (see ``_integrity``), set by
the statement that writes it and checked when it is read: an item changed
outside deepactors is ``StoreCorrupt``. An item that is not found at all (the
index damaged) cannot be told from one never written: a key-value store keeps
no list of what it should hold.
"""

from __future__ import annotations

import builtins
import functools
import json
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any, final

from ...errors import StoreCorrupt, StoreError, StoreFileLost, StoreUnavailable
from .._json import decode_object
from ..store import (
    Namespace,
    StoreItem,
    check_key,
    check_namespace,
    check_namespace_prefix,
    encode_value,
)
from ._conn import BUSY_TIMEOUT, Database, Errors, Schema, SqliteBase, text
from ._integrity import ITEM_CRC_FUNCTION as _CRC
from ._integrity import item_crc

__all__ = ["STORE_SCHEMA_VERSION", "SqliteStore"]

STORE_SCHEMA_VERSION = 2
"""The version of the store table this code writes and reads (2 added checksums)."""

# As for checkpoint records (``_records.CRC_AFTER``): the highest rowid
# written before checksums; an item above it without one lost it to damage.
_CRC_AFTER = "store_crc_after"

# A namespace is stored as its JSON array text: exact-match for ``list``, and for
# ``search`` a prefix ("a" then "b" is '["a","b"]', which starts with '["a",').
_SCHEMA = Schema(
    key="store",
    version=STORE_SCHEMA_VERSION,
    ddl=(
        """CREATE TABLE store_items (
        namespace  TEXT NOT NULL,
        key        TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        crc        INTEGER,
        value      TEXT NOT NULL,
        PRIMARY KEY (namespace, key)
    )""",
    ),
    # Old items keep no checksum (NULL: not checked) until they are next put;
    # an older deepactors, which would write items without one, refuses the file.
    upgrades={
        1: (
            "ALTER TABLE store_items ADD COLUMN crc INTEGER",
            f"INSERT INTO meta (key, value) SELECT '{_CRC_AFTER}',"
            " CAST(coalesce(max(rowid), 0) AS TEXT) FROM store_items",
        )
    },
)

_ERRORS = Errors(
    failed=StoreError,
    corrupt=StoreCorrupt,
    mismatch=StoreCorrupt,
    lost=StoreFileLost,
    unavailable=StoreUnavailable,
)

# The namespace column's text; the format is on disk, do not change it.
_encode_namespace = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _ns_text(namespace: Namespace) -> str:
    return _encode_namespace(list(namespace))


# Text columns are read as blobs and decoded here (see ``_conn.text``).
_ITEM_COLUMNS = "namespace, key, created_at, updated_at, value"
_SELECT_ITEMS = (
    "SELECT CAST(namespace AS BLOB), CAST(key AS BLOB), created_at, updated_at,"
    " CAST(value AS BLOB), crc, rowid FROM store_items"
)


def _item(row: tuple[Any, ...]) -> StoreItem:
    """One row as an item. Raises ValueError saying what is bad."""
    ns, key, created_at, updated_at, value = row[:5]
    try:
        namespace = json.loads(text(ns, what="its namespace"))
        decoded = decode_object(text(value, what="its value"))
    except RecursionError:
        raise ValueError("it is nested too deeply to be JSON written here") from None
    except ValueError as exc:
        raise ValueError(f"it cannot be decoded ({exc})") from None
    if not isinstance(namespace, list) or not all(isinstance(p, str) for p in namespace):
        raise ValueError("its namespace is not a list of strings")
    if not isinstance(created_at, int | float) or not isinstance(updated_at, int | float):
        raise ValueError("its times are not numbers")
    return StoreItem(
        namespace=tuple(namespace),
        key=text(key, what="its key"),
        value=decoded,
        created_at=float(created_at),
        updated_at=float(updated_at),
    )


def _items(raw: sqlite3.Connection, file: str, rows: list[Any]) -> list[StoreItem]:
    out: list[StoreItem] = []
    unchecked: list[int] = []  # read once, if an item has no checksum
    for i, row in enumerate(rows):
        try:
            out.append(_item(row))
            # After decoding, so that a field that cannot be read is named as such.
            _check_crc(raw, row, unchecked)
        except ValueError as exc:
            raise StoreCorrupt(f"{file}: {_name(row, i)}: {exc}") from None
    return out


def _check_crc(raw: sqlite3.Connection, row: tuple[Any, ...], unchecked: list[int]) -> None:
    ns, key, created_at, updated_at, value, crc, rowid = row
    if crc is None:
        if not unchecked:
            found = raw.execute("SELECT value FROM meta WHERE key = ?", (_CRC_AFTER,)).fetchone()
            after = found[0] if found is not None else "0"
            unchecked.append(int(after) if isinstance(after, str) and after.isdigit() else 0)
        if not (type(rowid) is int and rowid <= unchecked[0]):
            raise ValueError("its checksum is missing")
        return
    if crc != item_crc(ns, key, created_at, updated_at, value):
        raise ValueError(
            "its checksum does not match its contents (changed outside deepactors:"
            " a damaged disk or file, or a hand edit)"
        )


def _name(row: tuple[Any, ...], i: int) -> str:
    """The item, named by its namespace and key when they can be read."""
    try:
        return f"store item {text(row[0], what='')} {text(row[1], what='')!r}"
    except ValueError:
        return f"store item {i + 1} of the result"


def _store_get(raw: sqlite3.Connection, file: str, ns: str, key: str) -> StoreItem | None:
    rows = raw.execute(f"{_SELECT_ITEMS} WHERE namespace = ? AND key = ?", (ns, key)).fetchall()
    items = _items(raw, file, rows)
    return items[0] if items else None


# The checksum is computed in the statement: an update keeps the row's created_at.
_PUT = (
    f"INSERT INTO store_items ({_ITEM_COLUMNS}, crc)"
    f" VALUES (?1, ?2, ?3, ?3, ?4, {_CRC}(CAST(?1 AS BLOB), CAST(?2 AS BLOB), ?3, ?3,"
    " CAST(?4 AS BLOB)))"
    " ON CONFLICT (namespace, key) DO UPDATE"
    " SET value = excluded.value, updated_at = excluded.updated_at,"
    f" crc = {_CRC}(CAST(namespace AS BLOB), CAST(key AS BLOB), created_at,"
    " excluded.updated_at, CAST(excluded.value AS BLOB))"
)


def _store_put(raw: sqlite3.Connection, ns: str, key: str, text: str, now: float) -> None:
    raw.execute(_PUT, (ns, key, now, text))


def _store_delete(raw: sqlite3.Connection, ns: str, key: str) -> None:
    raw.execute("DELETE FROM store_items WHERE namespace = ? AND key = ?", (ns, key))


def _store_list(raw: sqlite3.Connection, file: str, ns: str, prefix: str) -> list[StoreItem]:
    # substr counts characters, as Python's len does: an exact prefix test.
    rows = raw.execute(
        f"{_SELECT_ITEMS} WHERE namespace = ? AND substr(key, 1, ?) = ? ORDER BY key",
        (ns, len(prefix), prefix),
    ).fetchall()
    return _items(raw, file, rows)


def _store_search(
    raw: sqlite3.Connection, file: str, ns_prefix: Namespace, key_prefix: str
) -> list[StoreItem]:
    sql = f"{_SELECT_ITEMS} WHERE substr(key, 1, ?) = ?"
    params: list[object] = [len(key_prefix), key_prefix]
    if ns_prefix:
        exact = _ns_text(ns_prefix)
        below = exact[:-1] + ","  # '["a"' + ',' starts every namespace under ("a",)
        # The range [below, below with ',' bumped to '-') holds exactly the texts
        # that start with ``below``, and it can use the primary-key index.
        sql += " AND (namespace = ? OR (namespace >= ? AND namespace < ?))"
        params += [exact, below, below[:-1] + "-"]
    items = _items(raw, file, raw.execute(sql, params).fetchall())
    # Sorted here: JSON text order is not tuple order (escapes, separators).
    items.sort(key=lambda item: (item.namespace, item.key))
    return items


@final
class SqliteStore(SqliteBase):
    """A :class:`~deepactors.persistence.Store` in a SQLite file.

    Same connection handling as :class:`SqliteCheckpointer` (and it may share
    its file); each call is one statement in autocommit.

    Args:
        path: The database file.
        clock: Wall-clock time for ``created_at`` / ``updated_at`` (``time.time``).
        busy_timeout: Seconds a call waits for another writer's lock on the file
            (another process, say) before it fails with
            :class:`~deepactors.errors.StoreUnavailable` (5 by default).

    Raises:
        ConfigurationError: ``busy_timeout`` is not a number of seconds above 0.
        StoreCorrupt: On first use, when the file is not SQLite, is damaged, or
            holds a store of another schema version.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        self._db = Database(path, schema=_SCHEMA, errors=_ERRORS, busy_timeout=busy_timeout)
        self._clock = clock

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        ns = _ns_text(check_namespace(namespace))
        check_key(key)
        return await self._db.run(functools.partial(_store_get, file=self._db.file, ns=ns, key=key))

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """See :meth:`Store.put`."""
        ns = _ns_text(check_namespace(namespace))
        text = encode_value(check_key(key), value)
        await self._db.run(
            # A float, as the REAL column gives it back: the checksum's input.
            functools.partial(_store_put, ns=ns, key=key, text=text, now=float(self._clock()))
        )

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        ns = _ns_text(check_namespace(namespace))
        check_key(key)
        await self._db.run(functools.partial(_store_delete, ns=ns, key=key))

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list`."""
        ns = _ns_text(check_namespace(namespace))
        check_key(prefix, what="a key prefix")
        return await self._db.run(
            functools.partial(_store_list, file=self._db.file, ns=ns, prefix=prefix)
        )

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search`."""
        ns_prefix = check_namespace_prefix(namespace_prefix)
        check_key(key_prefix, what="a key prefix")
        return await self._db.run(
            functools.partial(
                _store_search,
                file=self._db.file,
                ns_prefix=ns_prefix,
                key_prefix=key_prefix,
            )
        )

"""Store items that expire: a time to live per item, a default, and a sweep.

Wrap any :class:`~deepactors.persistence.Store` (memory, SQLite, PostgreSQL)::

    store = ExpiringStore(SqliteStore("memory.db"), default_ttl=30 * 86400)
    await store.put(("notes",), "n1", {"text": "..."}, ttl=3600)  # an hour

An item put with a time to live (``ttl`` seconds, or the store's
``default_ttl``) is gone that long after it was last written, or last read
when ``refresh_on_read`` (LangGraph's default): reads never return an expired
item, and :meth:`ExpiringStore.sweep` (the server runs it every
``sweep_interval`` seconds) deletes them for good. Each item's expiry is kept in
the same store beside it (under the reserved namespace :data:`EXPIRY`, which
the wrapper hides), so nothing about the wrapped store's tables changes.
"""

from __future__ import annotations

import builtins
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, final

import anyio

from .._core.logs import get_logger
from ..errors import ConfigurationError, PersistenceError
from .index import SemanticSearch
from .store import Namespace, Store, StoreItem

__all__ = ["EXPIRY", "ExpiringStore"]

_log = get_logger("deepactors.persistence")

EXPIRY = "__expiry__"
"""The first label of the namespaces where items' expiry is kept (hidden, reserved)."""


def _check_ttl(ttl: float | None, what: str) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf:
        raise ValueError(f"{what}: seconds > 0 (or None: never), not {ttl!r}")
    return float(ttl)


@final
class ExpiringStore:
    """A store whose items may expire (see the module docstring).

    Args:
        store: The store that keeps the items and their expiry.
        default_ttl: Seconds an item put without a ``ttl`` lives; None: for ever.
        refresh_on_read: Whether reading an item (``get``, ``search``) starts
            its time to live again, as writing does.
        sweep_interval: Seconds between two sweeps by a server serving it.
        clock: Wall-clock seconds (``time.time``).

    Raises:
        ConfigurationError: A bad ``default_ttl``.
    """

    def __init__(
        self,
        store: Store,
        *,
        default_ttl: float | None = None,
        refresh_on_read: bool = True,
        sweep_interval: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            self.default_ttl = _check_ttl(default_ttl, "default_ttl")
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self.store = store
        self.refresh_on_read = refresh_on_read
        if not 0 < sweep_interval < math.inf:
            raise ConfigurationError(f"sweep_interval: seconds > 0, not {sweep_interval!r}")
        self.sweep_interval = float(sweep_interval)
        self._clock = clock

    def __repr__(self) -> str:
        return f"ExpiringStore({self.store!r}, default_ttl={self.default_ttl!r})"

    async def semantic_search(
        self,
        namespace_prefix: Namespace,
        query: str,
        *,
        filter: Mapping[str, object] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> builtins.list[tuple[StoreItem, float]]:
        """The wrapped index's :meth:`~deepactors.persistence.index.IndexedStore.semantic_search`,
        expired items left out.

        Raises:
            TypeError: The wrapped store has no index.
        """
        store = self.store
        if not isinstance(store, SemanticSearch):
            raise TypeError(f"{store!r} cannot be searched by meaning: it has no index")
        found = await store.semantic_search(
            namespace_prefix, query, filter=filter, limit=limit, offset=offset
        )
        alive = {
            (i.namespace, i.key) for i in await self._alive([i for i, _ in found], refresh_ttl)
        }
        return [(i, s) for i, s in found if (i.namespace, i.key) in alive]

    async def get(
        self, namespace: Namespace, key: str, *, refresh_ttl: bool | None = None
    ) -> StoreItem | None:
        """See :meth:`Store.get`; an expired item is None (and deleted)."""
        item = await self.store.get(namespace, key)
        if item is None:
            return None
        alive = await self._alive([item], refresh_ttl)
        return alive[0] if alive else None

    async def put(
        self, namespace: Namespace, key: str, value: dict[str, Any], *, ttl: float | None = None
    ) -> None:
        """See :meth:`Store.put`; it lives ``ttl`` seconds (else the default).

        Raises:
            ValueError: A bad ``ttl``, or a namespace starting with :data:`EXPIRY`.
        """
        if namespace and namespace[0] == EXPIRY:
            raise ValueError(f"the namespace label {EXPIRY!r} is reserved for expiry")
        seconds = _check_ttl(ttl, "ttl") or self.default_ttl
        await self.store.put(namespace, key, value)
        if seconds is None:
            await self.store.delete((EXPIRY, *namespace), key)
        else:
            until = self._clock() + seconds
            await self.store.put((EXPIRY, *namespace), key, {"ttl": seconds, "until": until})

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        await self.store.delete(namespace, key)
        await self.store.delete((EXPIRY, *namespace), key)

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list` (expired items left out, not refreshed)."""
        if namespace and namespace[0] == EXPIRY:
            return []
        return await self._alive(await self.store.list(namespace, prefix=prefix), False)

    async def search(
        self,
        namespace_prefix: Namespace,
        *,
        key_prefix: str = "",
        refresh_ttl: bool | None = None,
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search` (expired items and the expiry namespaces left out)."""
        items = await self.store.search(namespace_prefix, key_prefix=key_prefix)
        items = [i for i in items if i.namespace[0] != EXPIRY]
        # Their expiry in one read, not one per item.
        found = await self.store.search((EXPIRY, *namespace_prefix), key_prefix=key_prefix)
        markers = {(m.namespace[1:], m.key): m for m in found}
        return await self._alive(items, refresh_ttl, markers)

    async def sweep_forever(self) -> None:
        """Sweep every ``sweep_interval`` seconds until cancelled (a server's task).

        A sweep that fails (the database is down) is logged and tried at the
        next interval; the store's items stay hidden once expired meanwhile.
        """
        while True:
            await anyio.sleep(self.sweep_interval)
            try:
                gone = await self.sweep()
            except PersistenceError as exc:
                _log.warning("store sweep failed", error=str(exc))
            else:
                if gone:
                    _log.debug("store items expired", count=gone)

    async def sweep(self) -> int:
        """Delete every expired item; how many were."""
        now = self._clock()
        gone = 0
        for marker in await self.store.search((EXPIRY,)):
            if _until(marker.value) <= now:
                await self.store.delete(marker.namespace[1:], marker.key)
                await self.store.delete(marker.namespace, marker.key)
                gone += 1
        return gone

    async def _alive(
        self,
        items: builtins.list[StoreItem],
        refresh: bool | None,
        markers: Mapping[tuple[Namespace, str], StoreItem] | None = None,
    ) -> builtins.list[StoreItem]:
        """``items`` less the expired ones (deleted); the rest refreshed if asked.

        ``markers``: their expiry records already read (all under a prefix), else
        each is read here.
        """
        refresh = self.refresh_on_read if refresh is None else refresh
        now = self._clock()
        out = []
        for item in items:
            if markers is not None:
                marker = markers.get((item.namespace, item.key))
            else:
                marker = await self.store.get((EXPIRY, *item.namespace), item.key)
            if marker is None:
                out.append(item)
                continue
            if _until(marker.value) <= now:
                await self.delete(item.namespace, item.key)
                continue
            if refresh:
                ttl = float(marker.value.get("ttl", 0.0))
                await self.store.put(marker.namespace, item.key, {"ttl": ttl, "until": now + ttl})
            out.append(item)
        return out


def _until(value: Mapping[str, object]) -> float:
    until = value.get("until")
    # A marker that cannot be read counts as expired: better gone than kept for ever.
    return float(until) if isinstance(until, int | float) and math.isfinite(until) else -math.inf

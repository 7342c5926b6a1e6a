"""Long-term memory: a namespaced key-value ``Store`` and its in-memory form.

A namespace is a tuple of strings (``("memories", "alice")``); keys are strings
within one namespace; values are JSON-compatible dicts. ``list`` sees exactly one
namespace, never its children, so a backend given ``("a",)`` cannot see
``("a", "b")`` by accident; ``search`` is the one call that spans namespaces, and
only on purpose.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio.lowlevel

__all__ = ["MemoryStore", "Namespace", "Store", "StoreItem", "check_namespace"]

Namespace = tuple[str, ...]
"""A store namespace: a non-empty tuple of non-empty strings."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreItem:
    """One stored value.

    Attributes:
        namespace: The namespace it lives in.
        key: Its key in that namespace.
        value: A JSON-compatible dict (a copy: changing it changes nothing stored).
        created_at: When the key was first put, seconds since the epoch.
        updated_at: When it was last put.
    """

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: float
    updated_at: float


@runtime_checkable
class Store(Protocol):
    """Namespaced, async key-value storage of JSON-compatible dicts."""

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """The item at ``key`` in exactly ``namespace``, or None."""
        ...

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """Create or replace the item at ``key``.

        Raises:
            TypeError: ``value`` is not JSON-compatible.
        """
        ...

    async def delete(self, namespace: Namespace, key: str) -> None:
        """Remove the item at ``key``; nothing happens when there is none."""
        ...

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """Items in exactly ``namespace`` (not its children) whose key starts with
        ``prefix``, sorted by key."""
        ...

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """Items in ``namespace_prefix`` and every namespace below it, sorted by
        namespace then key."""
        ...


def check_namespace(namespace: Sequence[str]) -> Namespace:
    """Validate a namespace and return it as a tuple.

    Raises:
        ValueError: Empty, or with an empty or non-string part.
    """
    ns = tuple(namespace)
    if not ns or not all(isinstance(part, str) and part for part in ns):
        raise ValueError(f"a namespace is a non-empty tuple of non-empty strings, not {ns!r}")
    return ns


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    # A JSON round trip both checks the value is storable (as a database store
    # would) and cuts every link to the caller's objects.
    copied: dict[str, Any] = json.loads(json.dumps(value))
    return copied


class MemoryStore:
    """A :class:`Store` in a dict, for tests and single-process use.

    Values are copied in and out, so it behaves like a store backed by a database.
    """

    def __init__(self) -> None:
        self._data: dict[Namespace, dict[str, StoreItem]] = {}

    def __repr__(self) -> str:
        return f"MemoryStore(namespaces={len(self._data)})"

    def _item(self, item: StoreItem) -> StoreItem:
        return StoreItem(
            namespace=item.namespace,
            key=item.key,
            value=_copy(item.value),
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        ns = check_namespace(namespace)
        await anyio.lowlevel.checkpoint()
        item = self._data.get(ns, {}).get(key)
        return None if item is None else self._item(item)

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """See :meth:`Store.put`."""
        ns = check_namespace(namespace)
        stored = _copy(value)
        await anyio.lowlevel.checkpoint()
        now = time.time()
        items = self._data.setdefault(ns, {})
        old = items.get(key)
        items[key] = StoreItem(
            namespace=ns,
            key=key,
            value=stored,
            created_at=now if old is None else old.created_at,
            updated_at=now,
        )

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        ns = check_namespace(namespace)
        await anyio.lowlevel.checkpoint()
        items = self._data.get(ns)
        if items is not None:
            items.pop(key, None)
            if not items:
                del self._data[ns]

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list`."""
        ns = check_namespace(namespace)
        await anyio.lowlevel.checkpoint()
        items = self._data.get(ns, {})
        return [self._item(items[k]) for k in sorted(items) if k.startswith(prefix)]

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search`."""
        ns_prefix = tuple(namespace_prefix)
        await anyio.lowlevel.checkpoint()
        out: builtins.list[StoreItem] = []
        for ns in sorted(self._data):
            if ns[: len(ns_prefix)] != ns_prefix:
                continue
            items = self._data[ns]
            out.extend(self._item(items[k]) for k in sorted(items) if k.startswith(key_prefix))
        return out

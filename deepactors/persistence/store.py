"""Long-term memory: a namespaced key-value ``Store`` and its in-memory form.

A namespace is a tuple of strings (``("memories", "alice")``); keys are strings
within one namespace; values are JSON-compatible dicts. ``list`` sees exactly one
namespace, never its children, so a backend given ``("a",)`` cannot see
``("a", "b")`` by accident; ``search`` is the one call that spans namespaces, and
only on purpose.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, final, runtime_checkable

import anyio.lowlevel

from ._json import check_text, decode_object, encode_object

__all__ = [
    "MemoryStore",
    "Namespace",
    "Store",
    "StoreItem",
    "check_key",
    "check_namespace",
    "check_namespace_prefix",
    "encode_value",
]

Namespace = tuple[str, ...]
"""A store namespace: a non-empty tuple of non-empty strings."""


@final
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

        Nothing is stored unless ``value`` is a dict that JSON stores exactly:
        string keys all the way down, JSON-compatible values (see
        :meth:`Checkpointer.put <deepactors.persistence.Checkpointer.put>` for
        the rules on strings).

        Raises:
            TypeError: ``value`` is not a dict, or not JSON-compatible, or holds
                a key that is not a string.
            ValueError: A string in ``value`` would not read back the same, or
                the key or namespace holds a lone surrogate.
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
    for part in ns:
        check_text(part, what="a namespace part")
    return ns


def check_namespace_prefix(namespace_prefix: Sequence[str]) -> Namespace:
    """Validate a namespace prefix (may be empty: everything) and return it as a tuple.

    Raises:
        ValueError: A part is empty, not a string, or holds a lone surrogate.
    """
    return check_namespace(namespace_prefix) if namespace_prefix else ()


def check_key(key: str, *, what: str = "a store key") -> str:
    """Validate a key (or key prefix) and return it.

    Raises:
        TypeError: It is not a string.
        ValueError: It holds a lone surrogate.
    """
    if not isinstance(key, str):
        raise TypeError(f"{what} is a string, not {type(key).__name__}")
    return check_text(key, what=what)


def encode_value(key: str, value: object) -> str:
    """The stored text of a value, checked as :meth:`Store.put` promises."""
    # Strict JSON: items are served to clients (GET /store/items) that could
    # not parse NaN or Infinity.
    return encode_object(value, what=f"the store value for key {key!r}", finite=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stored:
    text: str
    created_at: float
    updated_at: float


@final
class MemoryStore:
    """A :class:`Store` in a dict, for tests and single-process use.

    Values are kept as the same JSON text SQLite stores and decoded afresh on every
    read, so it accepts and refuses exactly what :class:`SqliteStore` does, and
    nothing the caller does to a dict afterwards changes what is stored.

    Args:
        clock: Wall-clock time for ``created_at`` / ``updated_at`` (``time.time``).
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._data: dict[Namespace, dict[str, _Stored]] = {}
        self._clock = clock

    def __repr__(self) -> str:
        return f"MemoryStore(namespaces={len(self._data)})"

    @staticmethod
    def _item(ns: Namespace, key: str, stored: _Stored) -> StoreItem:
        return StoreItem(
            namespace=ns,
            key=key,
            value=decode_object(stored.text),
            created_at=stored.created_at,
            updated_at=stored.updated_at,
        )

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        ns = check_namespace(namespace)
        check_key(key)
        await anyio.lowlevel.checkpoint()
        stored = self._data.get(ns, {}).get(key)
        return None if stored is None else self._item(ns, key, stored)

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """See :meth:`Store.put`."""
        ns = check_namespace(namespace)
        text = encode_value(check_key(key), value)
        await anyio.lowlevel.checkpoint()
        now = self._clock()
        items = self._data.setdefault(ns, {})
        old = items.get(key)
        items[key] = _Stored(
            text=text, created_at=now if old is None else old.created_at, updated_at=now
        )

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        ns = check_namespace(namespace)
        check_key(key)
        await anyio.lowlevel.checkpoint()
        items = self._data.get(ns)
        if items is not None:
            items.pop(key, None)
            if not items:
                del self._data[ns]

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list`."""
        ns = check_namespace(namespace)
        check_key(prefix, what="a key prefix")
        await anyio.lowlevel.checkpoint()
        items = self._data.get(ns, {})
        return [self._item(ns, k, items[k]) for k in sorted(items) if k.startswith(prefix)]

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search`."""
        ns_prefix = check_namespace_prefix(namespace_prefix)
        check_key(key_prefix, what="a key prefix")
        await anyio.lowlevel.checkpoint()
        out: builtins.list[StoreItem] = []
        for ns in sorted(self._data):
            if ns[: len(ns_prefix)] != ns_prefix:
                continue
            items = self._data[ns]
            out.extend(
                self._item(ns, k, items[k]) for k in sorted(items) if k.startswith(key_prefix)
            )
        return out

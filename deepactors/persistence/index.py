"""Semantic search over a store: items found by meaning, as LangGraph's store offers it.

Wrap any :class:`~deepactors.persistence.Store` (memory, SQLite, PostgreSQL) with
an embedding function::

    store = IndexedStore(SqliteStore("memory.db"), embed=my_embeddings, fields=["text"])
    await store.put(("notes",), "n1", {"text": "the cat sat on the mat"})
    found = await store.semantic_search(("notes",), "where did the cat sit?")

Each item put is embedded once (the text of its indexed ``fields``: ``"$"`` for
the whole value, ``"text"`` or ``"a.b"`` for a field), and its vector is kept in
the same store beside it (under the reserved namespace :data:`VECTORS`, which
the wrapper hides from ``list`` and ``search``). :meth:`IndexedStore.semantic_search`
embeds the query and ranks the items under a namespace prefix by cosine
similarity, computed in a worker thread. That is a scan of the prefix's
vectors: fit for the thousands of memories of an agent's users, not for a
corpus of millions (use a vector database for that).

``embed`` is what LangGraph accepts: a function of a list of texts returning a
list of vectors (sync, run in a worker thread; or async), or a LangChain
``Embeddings`` object (``aembed_documents`` / ``aembed_query``).
"""

from __future__ import annotations

import builtins
import inspect
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, final, runtime_checkable

import anyio.to_thread

from ..errors import ConfigurationError
from .store import Namespace, Store, StoreItem

__all__ = ["VECTORS", "Embed", "IndexedStore", "SemanticSearch"]

VECTORS = "__vectors__"
"""The first label of the namespaces where items' vectors are kept (hidden, reserved)."""


class _Embeddings(Protocol):
    """What is used of a LangChain ``Embeddings`` object (``aembed_query`` too, if it has one)."""

    async def aembed_documents(self, texts: list[str]) -> Sequence[Sequence[float]]: ...


Embed = (
    Callable[[Sequence[str]], Sequence[Sequence[float]]]
    | Callable[[Sequence[str]], Awaitable[Sequence[Sequence[float]]]]
    | _Embeddings
)
"""An embedding function of a list of texts, or a LangChain ``Embeddings`` object."""


@runtime_checkable
class SemanticSearch(Protocol):
    """A store that can be searched by meaning (:class:`IndexedStore`, or a wrapper of one)."""

    async def semantic_search(
        self,
        namespace_prefix: Namespace,
        query: str,
        *,
        filter: Mapping[str, object] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[tuple[StoreItem, float]]:
        """See :meth:`IndexedStore.semantic_search`."""
        ...


@final
class IndexedStore:
    """A store whose items can also be searched by meaning (see the module docstring).

    Args:
        store: The store that keeps the items (and their vectors).
        embed: The embedding function, or a LangChain ``Embeddings``.
        dims: The vectors' length, checked when given (a model changed under a
            store is then an error, not silently wrong scores).
        fields: What of a value is embedded: ``"$"`` (all of it, as JSON), or
            field names (``"text"``, dotted for nested: ``"note.body"``).

    Raises:
        ConfigurationError: ``embed`` is not callable, ``fields`` is empty.
    """

    def __init__(
        self,
        store: Store,
        *,
        embed: Embed,
        dims: int | None = None,
        fields: Sequence[str] = ("$",),
    ) -> None:
        if isinstance(fields, str) or not fields:
            raise ConfigurationError("IndexedStore: fields is a non-empty list, like ['text']")
        if not (callable(embed) or hasattr(embed, "aembed_documents")):
            raise ConfigurationError(f"IndexedStore: embed must be callable, not {embed!r}")
        if dims is not None and (not isinstance(dims, int) or dims < 1):
            raise ConfigurationError(f"IndexedStore: dims is a positive int, not {dims!r}")
        self.store = store
        self.dims = dims
        self.fields = tuple(fields)
        self._embed = embed

    def __repr__(self) -> str:
        return f"IndexedStore({self.store!r}, fields={list(self.fields)!r})"

    # -- the Store protocol, vectors kept beside the items -------------------------------

    async def get(self, namespace: Namespace, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        return await self.store.get(namespace, key)

    async def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        """See :meth:`Store.put`; the value's indexed text is embedded first.

        Raises:
            ValueError: ``namespace`` starts with the reserved :data:`VECTORS`,
                or the embedding has the wrong length.
        """
        if namespace and namespace[0] == VECTORS:
            raise ValueError(f"the namespace label {VECTORS!r} is reserved for the index")
        if namespace and namespace[0].startswith("__"):
            # Another wrapper's own records (an expiry): kept, never embedded.
            await self.store.put(namespace, key, value)
            return
        text = self._text(value)
        vector = None if text is None else (await self._vectors([text], query=False))[0]
        await self.store.put(namespace, key, value)
        if vector is None:
            await self.store.delete((VECTORS, *namespace), key)
        else:
            await self.store.put((VECTORS, *namespace), key, {"v": vector})

    async def delete(self, namespace: Namespace, key: str) -> None:
        """See :meth:`Store.delete`."""
        await self.store.delete(namespace, key)
        await self.store.delete((VECTORS, *namespace), key)

    async def list(self, namespace: Namespace, *, prefix: str = "") -> builtins.list[StoreItem]:
        """See :meth:`Store.list`."""
        if namespace and namespace[0] == VECTORS:
            return []
        return await self.store.list(namespace, prefix=prefix)

    async def search(
        self, namespace_prefix: Namespace, *, key_prefix: str = ""
    ) -> builtins.list[StoreItem]:
        """See :meth:`Store.search` (the index's own namespaces left out)."""
        items = await self.store.search(namespace_prefix, key_prefix=key_prefix)
        return [i for i in items if i.namespace[0] != VECTORS]

    # -- by meaning ----------------------------------------------------------------------

    async def semantic_search(
        self,
        namespace_prefix: Namespace,
        query: str,
        *,
        filter: Mapping[str, object] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[tuple[StoreItem, float]]:
        """The items under ``namespace_prefix`` closest in meaning to ``query``, best first.

        Args:
            namespace_prefix: Where to look (the namespace and those below it).
            query: What to look for.
            filter: Values the items' fields must have (exact match).
            limit: At most this many.
            offset: After skipping this many of the best.

        Returns:
            ``(item, score)`` pairs; the score is the cosine similarity (1 is the same
            direction). Items put before the index existed, or with none of the
            indexed fields, are not found this way.
        """
        (wanted,) = await self._vectors([query], query=True)
        vectors = await self.store.search((VECTORS, *namespace_prefix))
        scored = await anyio.to_thread.run_sync(_rank, wanted, vectors)
        out: builtins.list[tuple[StoreItem, float]] = []
        skipped = 0
        for namespace, key, score in scored:
            item = await self.store.get(namespace, key)
            if item is None or not _matches(item.value, filter):
                continue
            if skipped < offset:
                skipped += 1
                continue
            out.append((item, score))
            if len(out) >= limit:
                break
        return out

    def _text(self, value: Mapping[str, object]) -> str | None:
        parts: builtins.list[str] = []
        for name in self.fields:
            if name == "$":
                parts.append(json.dumps(value, ensure_ascii=False, sort_keys=True))
                continue
            found: object = value
            for step in name.split("."):
                found = found.get(step) if isinstance(found, Mapping) else None
            if found is not None:
                parts.append(found if isinstance(found, str) else json.dumps(found))
        return "\n".join(parts) if parts else None

    async def _vectors(
        self, texts: builtins.list[str], *, query: bool
    ) -> builtins.list[builtins.list[float]]:
        embed: Any = self._embed  # a function or an object, told apart below
        raw: Any
        if hasattr(embed, "aembed_query") and query:
            raw = [await embed.aembed_query(texts[0])]
        elif hasattr(embed, "aembed_documents"):
            raw = await embed.aembed_documents(texts)
        elif inspect.iscoroutinefunction(embed) or inspect.iscoroutinefunction(
            getattr(embed, "__call__", None)  # noqa: B004 (an async callable object)
        ):
            raw = await embed(texts)
        else:
            raw = await anyio.to_thread.run_sync(embed, texts)
        vectors = [[float(x) for x in v] for v in raw]
        if len(vectors) != len(texts):
            raise ValueError(f"the embedding function gave {len(vectors)} vectors for {len(texts)}")
        for v in vectors:
            if self.dims is not None and len(v) != self.dims:
                raise ValueError(f"an embedding of length {len(v)}, not dims={self.dims}")
            if not all(math.isfinite(x) for x in v):
                raise ValueError("an embedding holds a non-finite number")
        return vectors


def _rank(
    wanted: Sequence[float], vectors: Sequence[StoreItem]
) -> builtins.list[tuple[Namespace, str, float]]:
    """``(namespace, key, cosine)`` of each stored vector, best first (in a worker thread)."""
    norm = math.sqrt(sum(x * x for x in wanted)) or 1.0
    out = []
    for item in vectors:
        v = item.value.get("v")
        if not isinstance(v, list) or len(v) != len(wanted):
            continue  # another model's vector: not comparable
        dot = sum(a * b for a, b in zip(wanted, v, strict=True))
        size = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append((item.namespace[1:], item.key, dot / (norm * size)))
    out.sort(key=lambda t: -t[2])
    return out


def _matches(value: Mapping[str, object], wanted: Mapping[str, object] | None) -> bool:
    return not wanted or all(value.get(k) == v for k, v in wanted.items())

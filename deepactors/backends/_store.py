"""``StoreBackend``: files as values in a long-term :class:`Store`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, final

import anyio

from deepactors._core.jsonvalue import JSONObject
from deepactors.errors import (
    BackendError,
    FileNotFound,
    InvalidPath,
    IsADirectory,
    UnsupportedOperation,
)
from deepactors.persistence.store import Namespace, Store, StoreItem, check_namespace

from ._paths import normalize_path
from ._protocol import (
    DEFAULT_MAX_MATCHES,
    EditResult,
    FileInfo,
    FilesOnly,
    GrepResult,
    ReadWindow,
    WriteResult,
    check_version,
    make_window,
)
from ._text import apply_edit, split_lines
from ._tree import (
    check_writable,
    glob_paths_in_thread,
    grep_contents_in_thread,
    is_folder,
    list_folder,
    paths_under,
)

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = ["StoreBackend"]

NamespaceFactory = Callable[[str], Sequence[str]]


def _content(item: StoreItem) -> str:
    content = item.value.get("content")
    if not isinstance(content, str):
        raise BackendError(f"store item {item.key!r} is not a file (no text 'content')")
    return content


def _number(item: StoreItem) -> int:
    version = item.value.get("version", 1)
    return version if isinstance(version, int) else 1


def _version(item: StoreItem) -> str:
    """The version token: the change count plus the file's creation id.

    The count alone restarts at 1 when a file is deleted and created again, so a
    read of the old file would pass for a read of the new one; the id (random,
    set at creation) tells them apart.
    """
    origin = item.value.get("id") or item.value.get("created_at", item.created_at)
    return f"{_number(item)}-{origin}"


def _info(path: str, item: StoreItem) -> FileInfo:
    return FileInfo(
        path=path,
        is_dir=False,
        size=len(_content(item).encode()),
        modified=item.updated_at,
        version=_version(item),
    )


@final
class StoreBackend(FilesOnly):
    """Files kept in a :class:`~deepactors.persistence.Store`, one key per path.

    Each file is a value ``{"content": str, "version": int, "id": str,
    "created_at": float, "modified_at": float}`` under its virtual path as key,
    in one namespace; ``id`` is random, set when the file is created, so the
    version token (``"<version>-<id>"``) of a file deleted and created again
    never repeats an old one. The
    backend reads and lists that namespace only: never another, nor namespaces
    below it that share its prefix.

    Changes are serialised by a lock shared by this backend and the backends
    :meth:`bind` makes from it, so concurrent edits through them never lose an
    update, and an ``expected_version`` is checked under it. (Writers using the
    same store and namespace through an unrelated backend object are not
    covered: a store has no compare-and-set.)

    Args:
        store: Where the files live.
        namespace: A tuple of strings, or a function from the agent's name to one
            (``lambda name: ("files", name)``), called by :meth:`bind`.
    """

    def __init__(
        self,
        store: Store,
        *,
        namespace: Sequence[str] | NamespaceFactory = ("files",),
    ) -> None:
        self._store = store
        self._factory: NamespaceFactory | None = None
        self._namespace: Namespace | None = None
        if callable(namespace):
            self._factory = namespace
        else:
            self._namespace = check_namespace(namespace)
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"StoreBackend({self._store!r}, namespace={self._namespace or self._factory!r})"

    @property
    def namespace(self) -> Namespace | None:
        """The namespace in use; None until :meth:`bind` when it is derived."""
        return self._namespace

    def bind(self, state: State, *, name: str = "main") -> StoreBackend:
        """This backend, or for a namespace function one on ``namespace(name)``."""
        if self._factory is None:
            return self
        bound = StoreBackend(self._store, namespace=check_namespace(self._factory(name)))
        bound._lock = self._lock
        return bound

    def _ns(self) -> Namespace:
        if self._namespace is None:
            raise UnsupportedOperation(
                "this StoreBackend derives its namespace from the agent's name; "
                "call backend.bind(state, name=...) first"
            )
        return self._namespace

    async def _all(self) -> dict[str, StoreItem]:
        # Keys in a file namespace are normalised virtual paths; anything else put
        # there by other code is not a file and is left out.
        items = await self._store.list(self._ns())
        return {i.key: i for i in items if i.key.startswith("/") and "content" in i.value}

    async def _get(self, path: str) -> StoreItem:
        item = await self._store.get(self._ns(), path)
        if item is None:
            if is_folder(await self._all(), path):
                raise IsADirectory(f"{path} is a folder", path=path)
            raise FileNotFound(f"no file at {path}", path=path)
        return item

    async def _put(self, path: str, content: str, old: StoreItem | None) -> str:
        now = time.time()
        value: JSONObject = {
            "content": content,
            "version": 1 if old is None else _number(old) + 1,
            "id": uuid.uuid4().hex[:16] if old is None else old.value.get("id"),
            "created_at": now if old is None else old.value.get("created_at", old.created_at),
            "modified_at": now,
        }
        if value["id"] is None:  # a file written before ids existed
            del value["id"]
        await self._store.put(self._ns(), path, value)
        return _version(
            StoreItem(namespace=self._ns(), key=path, value=value, created_at=now, updated_at=now)
        )

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`."""
        path = normalize_path(path)
        return list_folder(await self._all(), path, _info)

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        path = normalize_path(path)
        item = await self._get(path)
        lines = split_lines(_content(item))
        return make_window(path, lines, offset, limit, _version(item))

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        path = normalize_path(path)
        async with self._lock:
            files = await self._all()
            check_writable(files, path)
            old = files.get(path)
            check_version(path, expected_version, None if old is None else _version(old))
            version = await self._put(path, content, old)
        return WriteResult(path=path, version=version, created=old is None)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`.

        A store has no append: the value is read and put back whole, under the
        backend's lock.
        """
        path = normalize_path(path)
        async with self._lock:
            files = await self._all()
            check_writable(files, path)
            old = files.get(path)
            whole = content if old is None else _content(old) + content
            version = await self._put(path, whole, old)
        return WriteResult(path=path, version=version, created=old is None)

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        expected_version: str | None = None,
    ) -> EditResult:
        """See :meth:`Backend.edit`."""
        path = normalize_path(path)
        async with self._lock:
            item = await self._get(path)
            check_version(path, expected_version, _version(item))
            content, count = apply_edit(
                _content(item), old, new, replace_all=replace_all, path=path
            )
            version = await self._put(path, content, item)
        return EditResult(path=path, version=version, replacements=count)

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`."""
        path = normalize_path(path)
        if path == "/":
            raise InvalidPath("the root folder '/' cannot be deleted", path=path)
        async with self._lock:
            doomed = paths_under(await self._all(), path)
            if not doomed:
                raise FileNotFound(f"nothing at {path}", path=path)
            for p in doomed:
                await self._store.delete(self._ns(), p)

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`."""
        path = normalize_path(path)
        files = await self._all()
        return [_info(p, files[p]) for p in await glob_paths_in_thread(tuple(files), pattern, path)]

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """See :meth:`Backend.grep`."""
        path = normalize_path(path)
        contents = {p: _content(i) for p, i in (await self._all()).items()}
        return await grep_contents_in_thread(
            contents, pattern, path=path, glob=glob, max_matches=max_matches
        )

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`."""
        path = normalize_path(path)
        item = await self._store.get(self._ns(), path)
        if item is not None and "content" in item.value:
            return _info(path, item)
        if is_folder(await self._all(), path):
            return FileInfo(path=path, is_dir=True)
        raise FileNotFound(f"nothing at {path}", path=path)

"""``FilesystemBackend``: real files under a root folder."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import stat as stat_module
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread

from deepactors.errors import (
    BackendError,
    BinaryFile,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    IsADirectory,
    SpecialFile,
    UnsupportedOperation,
)

from ._fdpath import Anchor, open_anchor, real_paths
from ._fs_host import (
    TEMP_FLAGS,
    append_at,
    encoded,
    entry_stat,
    file_info,
    host_version,
    is_utf8,
    translate_os_error,
)
from ._fs_search import GrepTarget, compile_search, glob_under, grep_host, grep_target
from ._glob import compile_glob
from ._links import Resolved
from ._paths import join, normalize_path
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

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = ["FilesystemBackend"]

T = TypeVar("T")
MIB = 1024 * 1024
_DEEPAGENTS = "root_dir is deepagents' root: give one; only virtual_mode=True (paths stay in it)"


class FilesystemBackend(FilesOnly):
    """Real files under ``root``; the agent's ``/`` is ``root``.

    Paths with ``..`` or ``~`` are refused (:class:`~deepactors.errors.InvalidPath`)
    and so is any path that resolves outside the root, a symlink at any
    component included (:class:`~deepactors.errors.PathOutsideRoot`); ``ls`` and
    ``glob`` leave such symlinks out, and walks (``glob``, ``grep``) never follow
    a symlinked folder. A symlink that stays inside the root works like its
    target. Files with NUL bytes or that are not UTF-8 are
    :class:`~deepactors.errors.BinaryFile` to ``read`` and ``edit``; FIFOs,
    sockets and devices are :class:`~deepactors.errors.SpecialFile` and are
    never opened in a way that could block.

    The checks cannot be raced: paths are walked one component at a time from
    an open descriptor of the root, each folder opened with ``O_NOFOLLOW``
    relative to its parent, and symlinks are expanded by the backend itself
    (``readlink``) and checked against the root, never followed by the kernel.
    The final open, rename, unlink or rmtree is made relative to the parent's
    descriptor. So swapping a folder for a symlink while an operation runs
    cannot make it touch anything outside the root. (ripgrep, when used, walks
    the searched folder by name, so it only picks the files to search: each is
    read again through the root's descriptors and searched in Python, and no
    line from outside the root reaches a result.)

    All disk work runs in a worker thread, one thread call per operation, so the
    event loop never blocks. Writes are atomic (a temporary file in the same
    folder, then ``os.replace``): a reader sees the old or the new content, never
    half of it. Writes and edits through one backend are serialised, so
    concurrent edits do not lose updates, and an ``expected_version`` is checked
    under the same lock as the write.

    ``grep`` uses ripgrep when it is on ``PATH`` and Python otherwise, with
    identical results.

    Args:
        root: The folder that is ``/``. Until it exists it reads as an empty
            folder; the first write creates it.
        max_read_bytes: Larger files raise ``FileTooLarge`` on read and edit and
            are skipped by grep.
        max_write_bytes: Larger contents raise ``FileTooLarge`` on write and edit.
        use_ripgrep: None to use ripgrep when installed; False to always search in
            Python; True to require it (``UnsupportedOperation`` when missing).
        root_dir: deepagents' name for ``root``.
        virtual_mode: deepagents' flag; only ``True`` (its default) is accepted.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        max_read_bytes: int = 10 * MIB,
        max_write_bytes: int = 10 * MIB,
        use_ripgrep: bool | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        virtual_mode: bool = True,
    ) -> None:
        if not virtual_mode or (root is not None and root_dir is not None):
            raise InvalidPath(_DEEPAGENTS)
        # No disk access for an absolute root (constructors may run on the event
        # loop); symlinks in it are resolved in each operation's worker thread.
        # A relative root needs the working folder (one getcwd) to pin it now.
        root = os.fspath(root if root is not None else root_dir or ".")
        self.root = os.path.normpath(root) if os.path.isabs(root) else os.path.abspath(root)
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self._use_ripgrep = use_ripgrep
        self._rg: str | None = None
        self._write_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    def bind(self, state: State, *, name: str = "main") -> FilesystemBackend:
        """This backend: a disk folder does not depend on the agent."""
        return self

    async def _run(self, func: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))

    # -- paths ---------------------------------------------------------------

    def _anchor(self, *, create: bool = False) -> Anchor | None:
        """The open root; None when it does not exist (``create`` makes it)."""
        if create:
            os.makedirs(self.root, exist_ok=True)
        return open_anchor(self.root)

    @contextlib.contextmanager
    def _opened(
        self, path: str, *, create: bool = False, anchor: Anchor | None = None
    ) -> Iterator[Anchor]:
        """The open root, for an operation on ``path`` that needs it to exist.

        ``anchor``: the root already opened (to see whether it exists), which
        this closes with the rest; None opens it here.
        """
        if anchor is None:
            anchor = self._anchor(create=create)
        if anchor is None:
            raise FileNotFound(f"nothing at {path}", path=path)
        try:
            yield anchor
        except BackendError:
            raise  # PathOutsideRoot is a PermissionError, but already typed
        except OSError as exc:
            raise translate_os_error(exc, path) from None
        finally:
            anchor.close()

    # -- sync operations (worker thread) -------------------------------------

    def _ls_sync(self, path: str) -> list[FileInfo]:
        anchor = self._anchor()
        if anchor is None and path == "/":
            return []  # a root not created yet is an empty folder
        with self._opened(path, anchor=anchor) as anchor, anchor.target(path, last="dir") as t:
            with os.scandir(t.parent_fd) as it:
                entries = list(it)
            out = []
            for entry in entries:
                if not is_utf8(entry.name):
                    continue  # a name that is not UTF-8 cannot be an agent path
                virtual = join(path, entry.name)
                try:
                    st = entry_stat(anchor, virtual, entry)
                except OSError:
                    continue  # gone meanwhile
                if st is not None:
                    out.append(file_info(virtual, st))
        return sorted(out, key=lambda i: i.path)

    def _load(self, anchor: Anchor, path: str) -> tuple[str, os.stat_result]:
        fd, st = anchor.open_file(path)
        with open(fd, "rb") as f:
            if stat_module.S_ISDIR(st.st_mode):
                raise IsADirectory(f"{path} is a folder", path=path)
            if not stat_module.S_ISREG(st.st_mode):
                raise SpecialFile(
                    f"{path} is not a regular file (a FIFO, socket or device); it cannot be read",
                    path=path,
                )
            if st.st_size > self.max_read_bytes:
                raise FileTooLarge(
                    f"{path} is {st.st_size} bytes, over the read limit of "
                    f"{self.max_read_bytes}; search it with grep instead",
                    path=path,
                )
            data = f.read(self.max_read_bytes + 1)
        if len(data) > self.max_read_bytes:
            raise FileTooLarge(f"{path} is over the read limit", path=path)
        if b"\0" in data:
            raise BinaryFile(f"{path} is a binary file, not text", path=path)
        try:
            return data.decode("utf-8"), st
        except UnicodeDecodeError:
            raise BinaryFile(f"{path} is not UTF-8 text", path=path) from None

    def _read_sync(self, path: str, offset: int, limit: int | None) -> ReadWindow:
        with self._opened(path) as anchor:
            content, st = self._load(anchor, path)
        return make_window(path, split_lines(content), offset, limit, host_version(st))

    def _store(
        self, anchor: Anchor, path: str, content: str, expected: str | None
    ) -> tuple[str, bool]:
        """Atomically write ``content``; returns the version and whether it is new.

        Called under the write lock, which makes the ``expected`` version check
        and the write one step for writers through this backend.
        """
        data = encoded(path, content, self.max_write_bytes)
        with anchor.target(path, last="follow", create=True) as t:
            old = t.stat
            if not t.name or (old is not None and stat_module.S_ISDIR(old.st_mode)):
                raise IsADirectory(f"{path} is a folder", path=path)
            if old is not None and not stat_module.S_ISREG(old.st_mode):
                raise SpecialFile(
                    f"{path} is not a regular file (a FIFO, socket or device); it is not replaced",
                    path=path,
                )
            check_version(path, expected, None if old is None else host_version(old))
            tmp = f".{t.name[:200]}.{secrets.token_hex(6)}.tmp"
            fd = os.open(tmp, TEMP_FLAGS, 0o600, dir_fd=t.parent_fd)
            try:
                with open(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fchmod(fd, stat_module.S_IMODE(old.st_mode) if old else 0o644)
                    # Taken before the rename (which keeps mtime, size and inode), so
                    # it is this content's version even if another writer follows.
                    st = os.fstat(fd)
                os.replace(tmp, t.name, src_dir_fd=t.parent_fd, dst_dir_fd=t.parent_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=t.parent_fd)
                raise
        return host_version(st), old is None

    def _write_sync(self, path: str, content: str, expected: str | None) -> WriteResult:
        with self._write_lock, self._opened(path, create=True) as anchor:
            version, created = self._store(anchor, path, content, expected)
        return WriteResult(path=path, version=version, created=created)

    def _append_sync(self, path: str, content: str) -> WriteResult:
        data = encoded(path, content, self.max_write_bytes)
        # Under the write lock: an edit (read, replace, rename) in between would
        # otherwise replace the file with a copy that lacks this append.
        with (
            self._write_lock,
            self._opened(path, create=True) as anchor,
            anchor.target(path, last="follow", create=True) as t,
        ):
            old = t.stat
            if not t.name or (old is not None and stat_module.S_ISDIR(old.st_mode)):
                raise IsADirectory(f"{path} is a folder", path=path)
            st = append_at(t.parent_fd, t.name, data, path)
        return WriteResult(path=path, version=host_version(st), created=old is None)

    def _edit_sync(
        self, path: str, old: str, new: str, replace_all: bool, expected: str | None
    ) -> EditResult:
        # Read, replace and write under one lock: no concurrent edit slips between.
        # Nothing in it can block for long: the read never waits on a FIFO.
        with self._write_lock, self._opened(path) as anchor:
            content, st = self._load(anchor, path)
            check_version(path, expected, host_version(st))
            changed, count = apply_edit(content, old, new, replace_all=replace_all, path=path)
            # The version read is expected again: a change by another process
            # between the read and the write is refused rather than lost.
            version, _ = self._store(anchor, path, changed, host_version(st))
        return EditResult(path=path, version=version, replacements=count)

    def _delete_sync(self, path: str) -> None:
        if path == "/":
            raise InvalidPath("the root folder '/' cannot be deleted", path=path)
        with self._opened(path) as anchor, anchor.target(path, last="nofollow") as t:
            if t.stat is None:
                raise FileNotFound(f"nothing at {path}", path=path)
            if stat_module.S_ISDIR(t.stat.st_mode):
                # Relative to the parent's descriptor; does not follow symlinks inside.
                shutil.rmtree(t.name, dir_fd=t.parent_fd)
            else:
                os.unlink(t.name, dir_fd=t.parent_fd)  # a symlink itself, never its target

    def _glob_sync(self, pattern: str, path: str) -> list[FileInfo]:
        matcher = compile_glob(pattern)  # a bad pattern is refused even before the root exists
        anchor = self._anchor()
        if anchor is None:
            return []
        try:
            return glob_under(anchor, matcher, path, absolute=pattern.startswith("/"))
        finally:
            anchor.close()

    def _grep_prepare(self, path: str) -> GrepTarget | None:
        """What a grep of ``path`` searches, and with which ripgrep (if any).

        None when there is nothing to search (a root not created yet, or a
        single file over the read limit).
        """
        rg = None
        if self._use_ripgrep is not False:
            rg = self._rg or shutil.which("rg")
            if rg is None and self._use_ripgrep:
                raise UnsupportedOperation("use_ripgrep=True but ripgrep (rg) is not installed")
            self._rg = rg
        anchor = self._anchor()
        if anchor is None and path == "/":
            return None
        with self._opened(path, anchor=anchor) as anchor:
            host, is_dir = grep_target(anchor, path, self.max_read_bytes)
        if host is None:
            return None
        return GrepTarget(path=path, host=host, is_dir=is_dir, ripgrep=rg)

    def _stat_sync(self, path: str) -> FileInfo:
        anchor = self._anchor()
        if anchor is None and path == "/":
            return FileInfo(path="/", is_dir=True)
        with self._opened(path, anchor=anchor) as anchor, anchor.target(path, last="follow") as t:
            if t.stat is None:
                raise FileNotFound(f"nothing at {path}", path=path)
            return file_info(path, t.stat)

    # -- the protocol --------------------------------------------------------

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`."""
        return await self._run(self._ls_sync, normalize_path(path))

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        make_window("", (), offset, limit, "")  # argument checks before any disk work
        return await self._run(self._read_sync, normalize_path(path), offset, limit)

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        return await self._run(self._write_sync, normalize_path(path), content, expected_version)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`: only the new bytes are written (``O_APPEND``)."""
        return await self._run(self._append_sync, normalize_path(path), content)

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
        return await self._run(
            self._edit_sync, normalize_path(path), old, new, replace_all, expected_version
        )

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`."""
        await self._run(self._delete_sync, normalize_path(path))

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`."""
        return await self._run(self._glob_sync, pattern, normalize_path(path))

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
        # Compiled in a worker thread, like every use of the model's patterns.
        regex, accept = await anyio.to_thread.run_sync(compile_search, pattern, glob, path)
        target = await self._run(self._grep_prepare, path)
        if target is None:
            return GrepResult(matches=(), truncated=False)
        return await grep_host(
            functools.partial(self._opened, path),
            target,
            regex,
            accept,
            max_matches=max_matches,
            max_bytes=self.max_read_bytes,
        )

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`."""
        return await self._run(self._stat_sync, normalize_path(path))

    async def resolve_links(self, paths: Sequence[str]) -> list[Resolved]:
        """Where each normalised path leads: symlinks inside the root followed."""
        return await self._run(lambda: real_paths(self._anchor(), paths))

"""``FilesystemBackend``: real files under a root folder."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat as stat_module
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread

from deepactors.errors import (
    BackendError,
    BinaryFile,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    IsADirectory,
    NotADirectory,
    PathOutsideRoot,
    UnsupportedOperation,
)

from ._glob import compile_glob, name_filter
from ._grep import grep_with_python, grep_with_ripgrep
from ._paths import join, normalize_path, path_key, relative_to
from ._protocol import (
    DEFAULT_MAX_MATCHES,
    EditResult,
    ExecuteResult,
    FileInfo,
    GrepResult,
    ReadWindow,
    WriteResult,
    make_window,
)
from ._text import apply_edit, compile_pattern, split_lines

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = ["FilesystemBackend"]

T = TypeVar("T")
MIB = 1024 * 1024


def _version(st: os.stat_result) -> str:
    # The inode is in the token because our writes replace the file (new inode):
    # two writes within one mtime tick that keep the size still differ.
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def _translate(exc: OSError, path: str) -> BackendError:
    """The typed error for an ``OSError`` about agent path ``path``."""
    if isinstance(exc, FileNotFoundError):
        return FileNotFound(f"nothing at {path}", path=path)
    if isinstance(exc, IsADirectoryError):
        return IsADirectory(f"{path} is a folder", path=path)
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return NotADirectory(f"a parent of {path} is a file, not a folder", path=path)
    return BackendError(f"{path}: {exc.strerror or exc}", path=path)


class FilesystemBackend:
    """Real files under ``root``; the agent's ``/`` is ``root``.

    Paths with ``..`` or ``~`` are refused (:class:`~deepactors.errors.InvalidPath`)
    and so is any path that resolves outside the root, a symlink at any
    component included (:class:`~deepactors.errors.PathOutsideRoot`); ``ls`` and
    ``glob`` leave such symlinks out, and walks (``glob``, ``grep``) never follow
    a symlinked folder. Files with NUL bytes or that are not UTF-8 are
    :class:`~deepactors.errors.BinaryFile` to ``read`` and ``edit``.

    All disk work runs in a worker thread, one thread call per operation, so the
    event loop never blocks. Writes are atomic (a temporary file in the same
    folder, then ``os.replace``): a reader sees the old or the new content, never
    half of it. Writes and edits through one backend are serialised, so
    concurrent edits do not lose updates.

    ``grep`` uses ripgrep when it is on ``PATH`` and Python otherwise, with
    identical results.

    Args:
        root: The folder that is ``/``; created on the first write if missing.
        max_read_bytes: Larger files raise ``FileTooLarge`` on read and edit and
            are skipped by grep.
        max_write_bytes: Larger contents raise ``FileTooLarge`` on write and edit.
        use_ripgrep: None to use ripgrep when installed; False to always search in
            Python; True to require it (``UnsupportedOperation`` when missing).
    """

    can_execute = False

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = 10 * MIB,
        max_write_bytes: int = 10 * MIB,
        use_ripgrep: bool | None = None,
    ) -> None:
        # No disk access for an absolute root (constructors may run on the event
        # loop); symlinks in it are resolved in each operation's worker thread.
        # A relative root needs the working folder (one getcwd) to pin it now.
        root = os.fspath(root)
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

    def _root(self) -> str:
        return os.path.realpath(self.root)

    def _host(self, path: str, *, follow: bool = True) -> str:
        """The host path of a normalised virtual path, checked to stay under root.

        ``realpath`` resolves symlinks at every component (also on a path that
        does not exist yet), so one prefix check covers them all. With
        ``follow=False`` the last component itself is not resolved (delete
        removes a symlink, not its target).
        """
        root = self._root()
        if path == "/":
            return root
        candidate = os.path.join(root, path[1:])
        if follow:
            real = os.path.realpath(candidate)
        else:
            head, name = os.path.split(candidate)
            real = os.path.join(os.path.realpath(head), name)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise PathOutsideRoot(
                f"{path} resolves outside the backend's root folder (through a symlink); "
                "only files under the root can be used",
                path=path,
            )
        return real

    def _virtual(self, host: str, root: str) -> str | None:
        """The virtual path of a host path under ``root``; None when unusable."""
        # Plain string work (no relpath: it calls getcwd), so it may run on the loop.
        if host == root:
            return "/"
        prefix = root.rstrip(os.sep) + os.sep
        if not host.startswith(prefix):
            return None
        rel = host[len(prefix) :]
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            return None  # a name that is not UTF-8 cannot be an agent path
        return "/" + rel.replace(os.sep, "/")

    def _inside(self, host: str, root: str) -> bool:
        real = os.path.realpath(host)
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    # -- sync operations (worker thread) -------------------------------------

    def _info(self, path: str, st: os.stat_result) -> FileInfo:
        if stat_module.S_ISDIR(st.st_mode):
            return FileInfo(path=path, is_dir=True, modified=st.st_mtime)
        return FileInfo(
            path=path, is_dir=False, size=st.st_size, modified=st.st_mtime, version=_version(st)
        )

    def _entries(self, folder: str, host: str, root: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
        with os.scandir(host) as it:
            for entry in it:
                if self._virtual(entry.path, root) is None:
                    continue
                if entry.is_symlink() and not self._inside(entry.path, root):
                    continue
                yield join(folder, entry.name), entry

    def _ls_sync(self, path: str) -> list[FileInfo]:
        root = self._root()
        host = self._host(path)
        try:
            if not os.path.isdir(host):
                os.stat(host)  # FileNotFound when missing
                raise NotADirectory(f"{path} is a file, not a folder", path=path)
            out = []
            for virtual, entry in self._entries(path, host, root):
                try:
                    out.append(self._info(virtual, entry.stat()))
                except OSError:
                    continue  # a dangling symlink, or gone meanwhile
        except OSError as exc:
            raise _translate(exc, path) from None
        return sorted(out, key=lambda i: i.path)

    def _load(self, path: str, host: str) -> tuple[str, os.stat_result]:
        try:
            with open(host, "rb") as f:
                st = os.fstat(f.fileno())
                if stat_module.S_ISDIR(st.st_mode):
                    raise IsADirectory(f"{path} is a folder", path=path)
                if st.st_size > self.max_read_bytes:
                    raise FileTooLarge(
                        f"{path} is {st.st_size} bytes, over the read limit of "
                        f"{self.max_read_bytes}; search it with grep instead",
                        path=path,
                    )
                data = f.read(self.max_read_bytes + 1)
        except OSError as exc:
            raise _translate(exc, path) from None
        if len(data) > self.max_read_bytes:
            raise FileTooLarge(f"{path} is over the read limit", path=path)
        if b"\0" in data:
            raise BinaryFile(f"{path} is a binary file, not text", path=path)
        try:
            return data.decode("utf-8"), st
        except UnicodeDecodeError:
            raise BinaryFile(f"{path} is not UTF-8 text", path=path) from None

    def _read_sync(self, path: str, offset: int, limit: int | None) -> ReadWindow:
        content, st = self._load(path, self._host(path))
        return make_window(path, split_lines(content), offset, limit, _version(st))

    def _store(self, path: str, host: str, content: str) -> tuple[str, bool]:
        """Atomically write ``content``; returns the version and whether it is new."""
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BackendError(f"content for {path} is not valid text: {exc}", path=path) from None
        if len(data) > self.max_write_bytes:
            raise FileTooLarge(
                f"content for {path} is {len(data)} bytes, over the write limit of "
                f"{self.max_write_bytes}",
                path=path,
            )
        if host == self._root():
            raise IsADirectory("/ is the root folder", path=path)
        folder, name = os.path.split(host)
        try:
            os.makedirs(folder, exist_ok=True)
            try:
                old = os.stat(host)
            except FileNotFoundError:
                old = None
            if old is not None and stat_module.S_ISDIR(old.st_mode):
                raise IsADirectory(f"{path} is a folder", path=path)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.chmod(tmp, stat_module.S_IMODE(old.st_mode) if old else 0o644)
                os.replace(tmp, host)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            return _version(os.stat(host)), old is None
        except OSError as exc:
            raise _translate(exc, path) from None

    def _write_sync(self, path: str, content: str) -> WriteResult:
        host = self._host(path)
        with self._write_lock:
            version, created = self._store(path, host, content)
        return WriteResult(path=path, version=version, created=created)

    def _edit_sync(self, path: str, old: str, new: str, replace_all: bool) -> EditResult:
        host = self._host(path)
        # Read, replace and write under one lock: no concurrent edit slips between.
        with self._write_lock:
            content, _ = self._load(path, host)
            changed, count = apply_edit(content, old, new, replace_all=replace_all, path=path)
            version, _ = self._store(path, host, changed)
        return EditResult(path=path, version=version, replacements=count)

    def _delete_sync(self, path: str) -> None:
        if path == "/":
            raise InvalidPath("the root folder '/' cannot be deleted", path=path)
        host = self._host(path, follow=False)
        try:
            st = os.lstat(host)
            if stat_module.S_ISDIR(st.st_mode):
                shutil.rmtree(host)  # does not follow symlinks inside
            else:
                os.unlink(host)  # a symlink itself, never its target
        except OSError as exc:
            raise _translate(exc, path) from None

    def _glob_sync(self, pattern: str, path: str) -> list[FileInfo]:
        matcher = compile_glob(pattern)
        absolute = pattern.startswith("/")
        root = self._root()
        host = self._host(path)
        out: list[FileInfo] = []

        def walk(folder: str, host_folder: str, depth: int) -> None:
            try:
                entries = sorted(self._entries(folder, host_folder, root), key=lambda e: e[0])
            except OSError:
                return
            for virtual, entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        hidden = entry.name.startswith(".") and not matcher.dot_segments
                        if not hidden and (matcher.max_depth is None or depth < matcher.max_depth):
                            walk(virtual, entry.path, depth + 1)
                        continue
                    rel = virtual[1:] if absolute else relative_to(virtual, path)
                    if matcher.matches(rel):
                        st = entry.stat()
                        if stat_module.S_ISREG(st.st_mode):
                            out.append(self._info(virtual, st))
                except OSError:
                    continue

        if os.path.isdir(host):
            walk(path, host, 1)
        return sorted(out, key=lambda i: path_key(i.path))

    def _grep_prepare(self, path: str) -> tuple[str, str, str | None, bool]:
        host = self._host(path)
        if not os.path.exists(host):
            raise FileNotFound(f"nothing at {path}", path=path)
        is_dir = os.path.isdir(host)
        rg = None
        if self._use_ripgrep is not False:
            rg = self._rg or shutil.which("rg")
            if rg is None and self._use_ripgrep:
                raise UnsupportedOperation("use_ripgrep=True but ripgrep (rg) is not installed")
            self._rg = rg
        return self._root(), host, rg, is_dir

    def _stat_sync(self, path: str) -> FileInfo:
        try:
            return self._info(path, os.stat(self._host(path)))
        except OSError as exc:
            raise _translate(exc, path) from None

    # -- the protocol --------------------------------------------------------

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`."""
        return await self._run(self._ls_sync, normalize_path(path))

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        make_window("", (), offset, limit, "")  # argument checks before any disk work
        return await self._run(self._read_sync, normalize_path(path), offset, limit)

    async def write(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.write`."""
        return await self._run(self._write_sync, normalize_path(path), content)

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> EditResult:
        """See :meth:`Backend.edit`."""
        return await self._run(self._edit_sync, normalize_path(path), old, new, replace_all)

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
        regex = compile_pattern(pattern)
        filter_ = name_filter(glob) if glob is not None else None
        root, host, rg, is_dir = await self._run(self._grep_prepare, path)

        def to_virtual(found: str) -> str | None:
            # A single file is reported under the path the agent gave, even when
            # that is an (in-root) symlink to it.
            virtual = self._virtual(found, root) if is_dir else path
            if virtual is None or filter_ is None:
                return virtual
            matcher, names_only = filter_
            rel = virtual.rsplit("/", 1)[1] if names_only else relative_to(virtual, path)
            return virtual if matcher.matches(rel) else None

        if rg is not None:
            result = await grep_with_ripgrep(
                rg,
                host,
                regex,
                to_virtual,
                max_matches=max_matches,
                max_bytes=self.max_read_bytes,
            )
            if result is not None:
                return result
        return await self._run(
            grep_with_python,
            host,
            regex,
            to_virtual,
            max_matches=max_matches,
            max_bytes=self.max_read_bytes,
        )

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`."""
        return await self._run(self._stat_sync, normalize_path(path))

    async def execute(
        self,
        command: str,
        *,
        timeout: float | None = None,
    ) -> ExecuteResult:
        """Always raises: use :class:`LocalShellBackend` to run commands.

        Raises:
            UnsupportedOperation: Always.
        """
        raise UnsupportedOperation(f"{type(self).__name__} cannot run commands")

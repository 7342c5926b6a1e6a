"""Host-file helpers of the disk backend: open flags, version tokens, stats as
``FileInfo``, error mapping."""

from __future__ import annotations

import os
import stat as stat_module
from typing import TYPE_CHECKING

from deepactors.errors import (
    BackendError,
    FileNotFound,
    FileTooLarge,
    IsADirectory,
    NotADirectory,
    SpecialFile,
)

from ._links import check_shared
from ._protocol import FileInfo

if TYPE_CHECKING:
    from ._fdpath import Anchor

__all__ = [
    "APPEND_FLAGS",
    "TEMP_FLAGS",
    "append_at",
    "encoded",
    "entry_stat",
    "file_info",
    "host_version",
    "is_utf8",
    "translate_os_error",
]

TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
APPEND_FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | os.O_NOFOLLOW
    | os.O_NONBLOCK
    | getattr(os, "O_CLOEXEC", 0)
)


def is_utf8(name: str) -> bool:
    """Whether a host name is valid UTF-8 (otherwise it cannot be an agent path)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def host_version(st: os.stat_result) -> str:
    # The inode is in the token because our writes replace the file (new inode):
    # two writes within one mtime tick that keep the size still differ.
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def file_info(path: str, st: os.stat_result) -> FileInfo:
    """What the backend reports of the entry at agent path ``path``, from its stat."""
    if stat_module.S_ISDIR(st.st_mode):
        return FileInfo(path=path, is_dir=True, modified=st.st_mtime)
    return FileInfo(
        path=path, is_dir=False, size=st.st_size, modified=st.st_mtime, version=host_version(st)
    )


def entry_stat(anchor: Anchor, virtual: str, entry: os.DirEntry[str]) -> os.stat_result | None:
    """An entry's stat, a symlink's resolved inside the root; None to leave it out."""
    st = entry.stat(follow_symlinks=False)
    if not stat_module.S_ISLNK(st.st_mode):
        return st
    try:
        with anchor.target(virtual, last="follow") as t:
            return t.stat  # None: a dangling symlink
    except (BackendError, OSError):
        return None  # leads outside the root, or loops


def translate_os_error(exc: OSError, path: str) -> BackendError:
    """The typed error for an ``OSError`` about agent path ``path``."""
    if isinstance(exc, FileNotFoundError):
        return FileNotFound(f"nothing at {path}", path=path)
    if isinstance(exc, IsADirectoryError):
        return IsADirectory(f"{path} is a folder", path=path)
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return NotADirectory(f"a parent of {path} is a file, not a folder", path=path)
    return BackendError(f"{path}: {exc.strerror or exc}", path=path)


def encoded(path: str, content: str, limit: int) -> bytes:
    """``content`` as UTF-8, refused when it is not text or is over ``limit`` bytes."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BackendError(f"content for {path} is not valid text: {exc}", path=path) from None
    if len(data) > limit:
        raise FileTooLarge(
            f"content for {path} is {len(data)} bytes, over the write limit of {limit}",
            path=path,
        )
    return data


def append_at(parent_fd: int, name: str, data: bytes, path: str) -> os.stat_result:
    """Append ``data`` to the regular file ``name`` in a folder; its stat after.

    O_NOFOLLOW: a symlink swapped in since the walk is refused, not followed;
    O_NONBLOCK: a FIFO swapped in fails instead of waiting for a reader.
    """
    fd = os.open(name, APPEND_FLAGS, 0o644, dir_fd=parent_fd)
    try:
        st = os.fstat(fd)
        check_shared(st, path)  # appending changes every name of the file
        if not stat_module.S_ISREG(st.st_mode):
            raise SpecialFile(
                f"{path} is not a regular file (a FIFO, socket or device); nothing is appended",
                path=path,
            )
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    finally:
        os.close(fd)

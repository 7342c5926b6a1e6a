"""Resolving virtual paths on disk without letting the kernel follow a symlink.

Checking a path with ``realpath`` and then opening it by name leaves a gap: a
folder swapped for a symlink in between sends the open outside the root. Here
every step is taken from an open folder: the root is opened once, each
component is opened relative to its parent's descriptor with ``O_NOFOLLOW``,
and the final operation (open, create, rename, unlink, rmtree) runs relative to
the last folder's descriptor. A symlink met on the way is never followed by the
kernel: its text is read (``readlink``) and resolved here, against the root, so
one inside the root works like its target and one leading out of it is refused
(:class:`~deepactors.errors.PathOutsideRoot`) whatever is swapped meanwhile.

What this does not cover: a folder *moved* (renamed) out of the root by another
process while an operation holds it open keeps being used by that operation.

Linux and macOS (``dir_fd`` and ``O_NOFOLLOW`` are POSIX); not Windows.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_module
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from deepactors.errors import BackendError, PathOutsideRoot

from ._links import LINK_POLICY, Resolved, check_shared, symlink_refused

__all__ = ["DIR_FLAGS", "FILE_FLAGS", "Anchor", "Target", "open_anchor", "real_paths"]

MAX_SYMLINKS = 40
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
"""Open a folder, refusing a symlink (``ELOOP``/``ENOTDIR``)."""
FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC
"""Open a file for reading: never a symlink, never blocking on a FIFO or device."""
# Errors an O_NOFOLLOW open gives for a symlink (EMLINK on FreeBSD).
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s not in ("", ".")]


@dataclass(slots=True)
class Target:
    """A resolved path: the folder holding it (open) and its name in there.

    Attributes:
        parent_fd: Descriptor of the folder holding the target (owned: closed
            with :meth:`close`).
        name: The target's name in that folder; ``""`` when the target is the
            root itself (``parent_fd`` is then the root).
        segments: The resolved path below the root, symlinks expanded.
        stat: ``lstat`` of the target when it was resolved (``fstat`` of the
            folder when ``name`` is ``""``), None when absent.
    """

    parent_fd: int
    name: str
    segments: list[str]
    stat: os.stat_result | None = field(default=None)

    def close(self) -> None:
        """Close the parent's descriptor."""
        os.close(self.parent_fd)


class Anchor:
    """An open root folder, from which paths are resolved safely.

    Args:
        fd: Descriptor of the root folder (owned).
        prefixes: Host spellings of the root (real first, then as given), used
            to map an absolute symlink target back inside the root.
    """

    def __init__(self, fd: int, prefixes: tuple[str, ...]) -> None:
        self.fd = fd
        self.prefixes = prefixes

    def close(self) -> None:
        """Close the root's descriptor."""
        os.close(self.fd)

    def _outside(self, path: str) -> PathOutsideRoot:
        return PathOutsideRoot(
            f"{path} resolves outside the backend's root folder (through a symlink); "
            "only files under the root can be used",
            path=path,
        )

    def _link(self, fd: int, name: str, path: str) -> tuple[bool, list[str]]:
        """Read a symlink: whether it is absolute, and its segments (".." kept)."""
        target = os.readlink(name, dir_fd=fd)
        if not target.startswith("/"):
            return False, [s for s in target.split("/") if s not in ("", ".")]
        for prefix in self.prefixes:
            base = prefix.rstrip("/")
            if target == base or target.startswith(base + "/"):
                return True, _segments(target[len(base) :])
        raise self._outside(path)

    def resolve(self, path: str, *, last: str, create: bool = False) -> Target:
        """Walk ``path`` (a normalised virtual path) from the root.

        Args:
            path: The agent's path.
            last: What to do with the last component: ``"dir"`` opens it as a
                folder (the target's ``parent_fd`` is then that folder, ``name``
                is ``""``); ``"follow"`` resolves it while it is a symlink
                (``stat`` is then the real entry's); ``"nofollow"`` leaves it
                as it is (a symlink is the target itself).
            create: Create missing intermediate folders (for a write).

        Raises:
            PathOutsideRoot: A symlink on the way leads outside the root.
            OSError: As the walk met it (``FileNotFoundError``, ``NotADirectoryError``, ...).
        """
        pending = list(reversed(_segments(path)))
        stack = [os.dup(self.fd)]
        resolved: list[str] = []
        hops = 0
        try:
            while pending:
                name = pending.pop()
                if name == "..":  # only from a symlink's text: physical, on resolved folders
                    if not resolved:
                        raise self._outside(path)
                    os.close(stack.pop())
                    resolved.pop()
                    continue
                final = not pending
                if final and last != "dir":
                    try:
                        st: os.stat_result | None = os.stat(
                            name, dir_fd=stack[-1], follow_symlinks=False
                        )
                    except FileNotFoundError:
                        st = None
                    if last == "nofollow" or st is None or not stat_module.S_ISLNK(st.st_mode):
                        return Target(
                            parent_fd=stack.pop(), name=name, segments=[*resolved, name], stat=st
                        )
                else:
                    try:
                        fd = os.open(name, DIR_FLAGS, dir_fd=stack[-1])
                    except FileNotFoundError:
                        if not create or final:
                            raise
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(name, 0o777, dir_fd=stack[-1])
                        pending.append(name)  # open it (never follow it) on the next turn
                        continue
                    except OSError as exc:
                        if exc.errno not in _LINK_ERRNOS:
                            raise
                        st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                        if not stat_module.S_ISLNK(st.st_mode):
                            raise NotADirectoryError(errno.ENOTDIR, "not a folder") from None
                    else:
                        stack.append(fd)
                        resolved.append(name)
                        continue
                # ``name`` is a symlink: expand it here, never in the kernel (or
                # refuse it: the permission layer checked a path without links).
                if (refused := symlink_refused(path)) is not None:
                    raise refused
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise BackendError(f"{path}: too many levels of symbolic links", path=path)
                absolute, segments = self._link(stack[-1], name, path)
                if absolute:
                    while len(stack) > 1:
                        os.close(stack.pop())
                    resolved.clear()
                pending.extend(reversed(segments))
            # A folder opened with last="dir", or a path that is (or leads to) the root.
            fd = stack.pop()
            return Target(parent_fd=fd, name="", segments=list(resolved), stat=os.fstat(fd))
        finally:
            for fd in stack:
                os.close(fd)

    @contextlib.contextmanager
    def target(self, path: str, *, last: str, create: bool = False) -> Iterator[Target]:
        """:meth:`resolve` as a context manager that closes the descriptor."""
        t = self.resolve(path, last=last, create=create)
        try:
            yield t
        finally:
            t.close()

    def open_file(self, path: str) -> tuple[int, os.stat_result]:
        """Open a file for reading (never blocking) and ``fstat`` it.

        The caller checks the file type and closes the descriptor.
        """
        for _ in range(MAX_SYMLINKS):
            with self.target(path, last="follow") as t:
                if not t.name:
                    fd = os.dup(t.parent_fd)
                else:
                    try:
                        fd = os.open(t.name, FILE_FLAGS, dir_fd=t.parent_fd)
                    except OSError as exc:
                        if exc.errno in _LINK_ERRNOS - {errno.ENOTDIR}:
                            continue  # swapped for a symlink since the walk: walk again
                        raise
            try:
                st = os.fstat(fd)
                check_shared(st, path)
                return fd, st
            except BaseException:
                os.close(fd)
                raise
        raise BackendError(f"{path}: too many levels of symbolic links", path=path)


def open_anchor(root: str) -> Anchor | None:
    """Open the root folder; None when it does not exist (yet)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except FileNotFoundError:
        return None
    real = os.path.realpath(root)
    return Anchor(fd, (real, root) if real != root else (root,))


def real_paths(anchor: Anchor | None, paths: Sequence[str]) -> list[Resolved]:
    """Resolve normalised virtual paths from an open root, then close it (worker thread only)."""
    if anchor is None:
        return [Resolved(p) for p in paths]
    token = LINK_POLICY.set(None)  # resolving is exactly following the links
    try:
        return [_real(anchor, p) for p in paths]
    finally:
        LINK_POLICY.reset(token)
        anchor.close()


def _real(anchor: Anchor, path: str) -> Resolved:
    segments = _segments(path)
    # The longest prefix that resolves (a dangling link's text included); the
    # rest does not exist, so it holds no link and is kept as written.
    for cut in range(len(segments), -1, -1):
        try:
            with anchor.target("/" + "/".join(segments[:cut]), last="follow") as t:
                st = t.stat
                real = [*t.segments, *segments[cut:]]
        except OSError:  # missing (or unreadable): the shorter prefix decides
            continue
        whole = cut == len(segments) and st is not None and stat_module.S_ISREG(st.st_mode)
        return Resolved("/" + "/".join(real), whole and st is not None and st.st_nlink > 1)
    return Resolved(path)

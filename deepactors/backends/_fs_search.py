"""The disk backend's searches: glob's walk, and grep's target and engines.

``FilesystemBackend`` opens its root and hands the open ``Anchor`` here (in a
worker thread, as every disk operation): ``glob_under`` walks the folders by
descriptor, never through a symlinked folder, and keeps the regular files the
pattern matches; ``grep_target`` finds what a grep's path names on the host,
and ``grep_host`` searches it with ripgrep when there is one and it takes the
pattern, with Python otherwise (``_grep``: the same results either way).
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from deepactors._core.threads import StopFlag, run_sync_in_thread
from deepactors.errors import BackendError, FileNotFound, SpecialFile

from ._fdpath import DIR_FLAGS, Anchor
from ._fs_host import entry_stat, file_info, is_utf8
from ._glob import GlobMatcher
from ._grep import (
    glob_filter,
    grep_file_with_python,
    grep_with_python,
    grep_with_ripgrep,
    host_mapper,
    read_verified,
)
from ._paths import join, path_key, relative_to
from ._protocol import FileInfo, GrepResult
from ._regex import LinePattern, compile_pattern

__all__ = ["GrepTarget", "compile_search", "glob_under", "grep_host", "grep_target"]


def glob_under(
    anchor: Anchor, matcher: GlobMatcher, path: str, *, absolute: bool
) -> list[FileInfo]:
    """The regular files under ``path`` that ``matcher`` matches, in path order.

    ``absolute``: the pattern is matched against paths from the root, else
    against paths relative to ``path``. Hidden folders are entered only when the
    pattern names one, and no deeper than it can match.
    """
    out: list[FileInfo] = []

    def walk(fd: int, folder: str, depth: int) -> None:
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if not is_utf8(entry.name):
                continue
            virtual = join(folder, entry.name)
            try:
                if entry.is_dir(follow_symlinks=False):
                    hidden = entry.name.startswith(".") and not matcher.dot_segments
                    if not hidden and (matcher.max_depth is None or depth < matcher.max_depth):
                        sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                        try:
                            walk(sub, virtual, depth + 1)
                        finally:
                            os.close(sub)
                    continue
                rel = virtual[1:] if absolute else relative_to(virtual, path)
                if matcher.matches(rel):
                    st = entry_stat(anchor, virtual, entry)
                    if st is not None and stat_module.S_ISREG(st.st_mode):
                        out.append(file_info(virtual, st))
            except OSError:
                continue

    try:
        with anchor.target(path, last="dir") as t:
            walk(t.parent_fd, path, 1)
    except OSError:
        pass  # no folder there: nothing matches
    return sorted(out, key=lambda i: path_key(i.path))


def compile_search(
    pattern: str, glob: str | None, path: str
) -> tuple[LinePattern, Callable[[str], bool]]:
    """A grep's pattern and its ``glob`` filter, compiled (a worker thread's call).

    Raises:
        InvalidPath: The glob is not valid.
    """
    return compile_pattern(pattern), glob_filter(glob, path)


def grep_target(anchor: Anchor, path: str, max_bytes: int) -> tuple[str | None, bool]:
    """The host path a grep of ``path`` searches, and whether it is a folder.

    The host path is None for a file over ``max_bytes`` (nothing to search).

    Raises:
        FileNotFound: Nothing at ``path``.
        SpecialFile: ``path`` is a FIFO, socket or device.
    """
    with anchor.target(path, last="follow") as t:
        st = t.stat
        if st is None:
            raise FileNotFound(f"nothing at {path}", path=path)
        host = os.path.join(anchor.prefixes[0], *t.segments)
        if stat_module.S_ISDIR(st.st_mode):
            return host, True
        if not stat_module.S_ISREG(st.st_mode):
            raise SpecialFile(
                f"{path} is not a regular file (a FIFO, socket or device); it is not searched",
                path=path,
            )
        # A file named directly obeys the read limit too (ripgrep applies
        # --max-filesize only to the files it finds in folders).
        return (None if st.st_size > max_bytes else host), False


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepTarget:
    """What one grep searches: the agent's ``path``, its ``host`` path, whether it
    is a folder, and the ripgrep to search it with (None: Python's search)."""

    path: str
    host: str
    is_dir: bool
    ripgrep: str | None


async def grep_host(
    opened: Callable[[], AbstractContextManager[Anchor]],
    target: GrepTarget,
    regex: LinePattern,
    accept: Callable[[str], bool],
    *,
    max_matches: int,
    max_bytes: int,
) -> GrepResult:
    """Search ``target``: with ripgrep when it takes the pattern, else in Python.

    Args:
        opened: Opens the root for Python's search (in its worker thread).
        target: What to search (see :func:`grep_target`).
        regex: The compiled pattern.
        accept: The ``glob`` filter on agent paths.
        max_matches: Matches past which the result is truncated.
        max_bytes: Files over it are skipped.
    """
    path, host, is_dir = target.path, target.host, target.is_dir
    if target.ripgrep is not None:
        with contextlib.ExitStack() as stack:
            anchors: list[Anchor] = []  # the root, opened at the first file named

            def load(virtual: str) -> bytes | None:  # in a worker thread
                if not anchors:
                    try:
                        anchors.append(stack.enter_context(opened()))
                    except BackendError:
                        return None  # the root is gone
                return read_verified(anchors[0], virtual, max_bytes)

            result = await grep_with_ripgrep(
                target.ripgrep,
                host,
                regex,
                host_mapper(host, path, is_dir=is_dir, accept=accept),
                load,
                max_matches=max_matches,
                max_bytes=max_bytes,
            )
        if result is not None:
            return result
    stop = StopFlag()

    def search() -> GrepResult:
        grep = grep_with_python if is_dir else grep_file_with_python
        with opened() as anchor:
            return grep(anchor, path, regex, accept, max_matches, max_bytes, stop)

    return await run_sync_in_thread(search, name="grep", stop=stop)

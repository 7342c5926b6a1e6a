"""Folder logic for backends that keep a flat ``path -> file`` map (state, store).

Folders are implicit there: a path is a folder when some file lies under it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeVar

from deepactors._core.threads import StopFlag, run_sync_in_thread
from deepactors.errors import FileNotFound, IsADirectory, NotADirectory

from ._glob import compile_glob, name_filter
from ._paths import is_under, join, parent, path_key, relative_to
from ._protocol import FileInfo, GrepMatch, GrepResult
from ._regex import Stopped, compile_pattern

__all__ = [
    "check_writable",
    "glob_paths",
    "glob_paths_in_thread",
    "grep_contents",
    "grep_contents_in_thread",
    "is_folder",
    "list_folder",
    "paths_under",
]

T = TypeVar("T")


def is_folder(paths: Iterable[str], path: str) -> bool:
    """Whether some file lies strictly under ``path``."""
    if path == "/":
        return True
    prefix = path + "/"
    return any(p.startswith(prefix) for p in paths)


def paths_under(paths: Iterable[str], folder: str) -> list[str]:
    """The files at or below ``folder``, in tree order."""
    return sorted((p for p in paths if is_under(p, folder)), key=path_key)


def check_writable(files: Collection[str], path: str) -> None:
    """Refuse to write a file over a folder, or below a file.

    Raises:
        IsADirectory: ``path`` is a folder (or the root).
        NotADirectory: A parent of ``path`` is a file.
    """
    if path == "/" or (path not in files and is_folder(files, path)):
        raise IsADirectory(f"{path} is a folder", path=path)
    folder = parent(path)
    while folder != "/":
        if folder in files:
            raise NotADirectory(f"{folder} is a file, so {path} cannot be created", path=path)
        folder = parent(folder)


def list_folder(
    files: Mapping[str, T], folder: str, info: Callable[[str, T], FileInfo]
) -> list[FileInfo]:
    """The entries directly inside ``folder``, sorted by name.

    Raises:
        NotADirectory: ``folder`` is a file.
        FileNotFound: Nothing lies under ``folder``.
    """
    if folder in files:
        raise NotADirectory(f"{folder} is a file, not a folder", path=folder)
    entries: dict[str, FileInfo] = {}
    for path, item in files.items():
        if not is_under(path, folder) or path == folder:
            continue
        name, _, rest = relative_to(path, folder).partition("/")
        child = join(folder, name)
        if rest:
            entries.setdefault(child, FileInfo(path=child, is_dir=True))
        else:
            entries[child] = info(path, item)
    if not entries and folder != "/":
        raise FileNotFound(f"no folder at {folder}", path=folder)
    return [entries[k] for k in sorted(entries)]


def glob_paths(
    paths: Iterable[str], pattern: str, folder: str, stop: StopFlag | None = None
) -> list[str]:
    """The files below ``folder`` that ``pattern`` matches, in tree order.

    Raises:
        Stopped: ``stop`` was set.
    """
    matcher = compile_glob(pattern)
    absolute = pattern.startswith("/")
    out: list[str] = []
    for n, p in enumerate(paths):
        if n % 1024 == 0 and stop is not None and stop.is_set():
            raise Stopped
        if (
            is_under(p, folder)
            and p != folder
            and matcher.matches(p[1:] if absolute else relative_to(p, folder))
        ):
            out.append(p)
    return sorted(out, key=path_key)


def grep_contents(
    files: Mapping[str, str],
    pattern: str,
    *,
    path: str,
    glob: str | None,
    max_matches: int,
    stop: StopFlag | None = None,
) -> GrepResult:
    """Grep a ``path -> content`` map (see :meth:`Backend.grep`).

    Raises:
        InvalidPattern: The regular expression does not compile.
        FileNotFound: Nothing at ``path``.
        Stopped: ``stop`` was set.
    """
    regex = compile_pattern(pattern)
    if path not in files and not is_folder(files, path):
        raise FileNotFound(f"nothing at {path}", path=path)
    candidates = [path] if path in files else paths_under(files, path)
    if glob is not None:
        matcher, names_only = name_filter(glob)
        candidates = [
            p
            for p in candidates
            if matcher.matches(p.rsplit("/", 1)[1] if names_only else relative_to(p, path))
        ]
    matches: list[GrepMatch] = []
    for p in candidates:
        for number, line in regex.search_text(files[p], stop):
            if len(matches) == max_matches:
                return GrepResult(matches=tuple(matches), truncated=True)
            matches.append(GrepMatch(path=p, line_number=number, line=line))
    return GrepResult(matches=tuple(matches), truncated=False)


async def glob_paths_in_thread(paths: Collection[str], pattern: str, folder: str) -> list[str]:
    """:func:`glob_paths` in a worker thread: a model's pattern never runs on the loop."""
    stop = StopFlag()
    return await run_sync_in_thread(
        functools.partial(glob_paths, paths, pattern, folder, stop), name="glob", stop=stop
    )


async def grep_contents_in_thread(
    files: Mapping[str, str], pattern: str, *, path: str, glob: str | None, max_matches: int
) -> GrepResult:
    """:func:`grep_contents` in a worker thread, given up at a cancellation."""
    stop = StopFlag()
    search = functools.partial(
        grep_contents, files, pattern, path=path, glob=glob, max_matches=max_matches, stop=stop
    )
    return await run_sync_in_thread(search, name="grep", stop=stop)

"""Grep over a folder on disk: ripgrep when installed, the same in Python otherwise.

Both paths give identical results: the same files (no symlinks followed while
walking, dotfiles included, files with a NUL byte (UTF-16 ones too) or over the
size limit skipped, names that are not UTF-8 left out), the same line
splitting, the same order (a sorted tree walk, which is ripgrep's
``--sort path``) and the same truncation. ripgrep only picks the files that
hold a match (its default engine, given the pattern as translated for RE2, see
``_regex``); each is then read through the root's descriptors and searched with
RE2 by the same code as the walk in Python, so a difference between the engines
can only drop a file, never add a line, and a folder swapped for a symlink
while ripgrep walks cannot bring a line from outside the root into the result.
A pattern ripgrep cannot compile falls back to Python.

Nothing here runs a pattern or reads a file on the event loop: that happens in
worker threads, a chunk of ripgrep's output at a time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat as stat_module
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from deepactors._core.threads import StopFlag
from deepactors.errors import BackendError

from ._fdpath import DIR_FLAGS, FILE_FLAGS, Anchor
from ._glob import name_filter
from ._paths import join, relative_to
from ._protocol import GrepMatch, GrepResult
from ._regex import LinePattern, Stopped

__all__ = [
    "glob_filter",
    "grep_file_with_python",
    "grep_with_python",
    "grep_with_ripgrep",
    "host_mapper",
    "read_verified",
    "walk_files",
]

# Maps a host path found by ripgrep to its virtual path, or None to skip it
# (a glob filter, a name that is not valid UTF-8, ...).
PathMapper = Callable[[str], "str | None"]


def walk_files(fd: int, folder: str) -> Iterator[tuple[int, str, str]]:
    """Entries below an open folder that may be regular files, in sorted tree order.

    Yields ``(folder fd, name, virtual path)``; the folder's descriptor is only
    valid until the next item. Sub-folders are opened relative to their parent
    with ``O_NOFOLLOW``, so a symlinked folder is never entered, not even one
    swapped in during the walk. Names that are not UTF-8 are left out.
    """
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            continue
        virtual = join(folder, entry.name)
        try:
            if entry.is_dir(follow_symlinks=False):
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
            elif entry.is_file(follow_symlinks=False):
                yield fd, entry.name, virtual
                continue
            else:
                continue
        except OSError:
            continue  # gone, or swapped for a symlink, meanwhile
        try:
            yield from walk_files(sub, virtual)
        finally:
            os.close(sub)


def glob_filter(glob: str | None, path: str) -> Callable[[str], bool]:
    """Whether a virtual path under ``path`` passes grep's ``glob`` filter.

    Raises:
        InvalidPath: The glob is not valid.
    """
    if glob is None:
        return lambda virtual: True
    matcher, names_only = name_filter(glob)

    def accept(virtual: str) -> bool:
        rel = virtual.rsplit("/", 1)[1] if names_only else relative_to(virtual, path)
        return matcher.matches(rel)

    return accept


def host_mapper(host: str, path: str, *, is_dir: bool, accept: Callable[[str], bool]) -> PathMapper:
    """Map what ripgrep found under ``host`` to a virtual path under ``path``.

    A path is reported under the one the agent gave, even when that is an
    (in-root) symlink to a file or folder elsewhere in the root.
    """
    folder = host.rstrip(os.sep) + os.sep

    def to_virtual(found: str) -> str | None:
        if not is_dir or found == host:
            virtual: str | None = path
        elif found.startswith(folder):
            rel = found[len(folder) :]
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                return None  # not UTF-8: no agent path names it
            virtual = join(path, rel.replace(os.sep, "/"))
        else:
            virtual = None
        return virtual if virtual is not None and accept(virtual) else None

    return to_virtual


def _read_text(fd: int, max_bytes: int) -> bytes | None:
    """The bytes of an open file when it is a regular text file within the limit."""
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        data = f.read(max_bytes + 1)
    return None if b"\0" in data or len(data) > max_bytes else data


def grep_with_python(
    anchor: Anchor,
    path: str,
    regex: LinePattern,
    accept: Callable[[str], bool],
    max_matches: int,
    max_bytes: int,
    stop: StopFlag | None = None,
) -> GrepResult:
    """Search a folder on disk; runs in a worker thread.

    Files that vanish, change type or cannot be opened meanwhile are skipped,
    as ripgrep skips them; FIFOs and devices are never opened in a blocking way.

    Raises:
        Stopped: ``stop`` was set.
    """
    matches: list[GrepMatch] = []

    def search(virtual: str, data: bytes) -> bool:
        for number, line in regex.search_text(data.decode("utf-8", errors="replace"), stop):
            if len(matches) == max_matches:
                return False
            matches.append(GrepMatch(path=virtual, line_number=number, line=line))
        return True

    with anchor.target(path, last="dir") as folder:
        for fd, name, virtual in walk_files(folder.parent_fd, path):
            if stop is not None and stop.is_set():
                raise Stopped
            if not accept(virtual):
                continue
            try:
                data = _read_text(os.open(name, FILE_FLAGS, dir_fd=fd), max_bytes)
            except OSError:
                continue
            if data is not None and not search(virtual, data):
                return GrepResult(matches=tuple(matches), truncated=True)
        return GrepResult(matches=tuple(matches), truncated=False)


def grep_file_with_python(
    anchor: Anchor,
    path: str,
    regex: LinePattern,
    accept: Callable[[str], bool],
    max_matches: int,
    max_bytes: int,
    stop: StopFlag | None = None,
) -> GrepResult:
    """Search one file on disk; runs in a worker thread.

    Raises:
        Stopped: ``stop`` was set.
    """
    matches: list[GrepMatch] = []
    data = _read_text(anchor.open_file(path)[0], max_bytes) if accept(path) else None
    if data is not None:
        text = data.decode("utf-8", errors="replace")
        for number, line in regex.search_text(text, stop):
            if len(matches) == max_matches:
                return GrepResult(matches=tuple(matches), truncated=True)
            matches.append(GrepMatch(path=path, line_number=number, line=line))
    return GrepResult(matches=tuple(matches), truncated=False)


def _search_bytes(regex: LinePattern, virtual: str, data: bytes | None) -> list[GrepMatch]:
    if data is None:
        return []
    text = data.decode("utf-8", errors="replace")
    return [
        GrepMatch(path=virtual, line_number=n, line=line) for n, line in regex.search_text(text)
    ]


def read_verified(anchor: Anchor, virtual: str, max_bytes: int) -> bytes | None:
    """A file's bytes read through the root's descriptors (None: not text, or gone)."""
    try:
        return _read_text(anchor.open_file(virtual)[0], max_bytes)
    except (OSError, BackendError):
        return None  # gone, swapped for a special file or a link outside the root


@dataclass(slots=True, kw_only=True)
class _Candidates:
    """The files ripgrep names, searched again through the root's descriptors.

    ripgrep only picks the files: it opens them by name, so a folder swapped for
    a symlink while it walks could make it read a file outside the root. Each
    file it names is read again through ``load``, which walks from the root's
    descriptor and never follows a link out of it, and searched with the same
    Python code as the walk without ripgrep. Whatever ripgrep read, the result
    holds only lines of files inside the root (and the results of both engines
    are the same by construction).
    """

    regex: LinePattern
    to_virtual: PathMapper
    load: Callable[[str], bytes | None]
    max_matches: int
    matches: list[GrepMatch] = field(default_factory=list)
    truncated: bool = False

    def feed(self, found: list[bytes]) -> bool:
        """Search the named files; False once more than ``max_matches`` were found."""
        for raw in found:
            virtual = self.to_virtual(os.fsdecode(raw))
            if virtual is None:
                continue
            self.matches.extend(_search_bytes(self.regex, virtual, self.load(virtual)))
            if len(self.matches) > self.max_matches:
                self.truncated = True
                return False
        return True


async def grep_with_ripgrep(
    rg: str,
    host: str,
    regex: LinePattern,
    to_virtual: PathMapper,
    load: Callable[[str], bytes | None],
    *,
    max_matches: int,
    max_bytes: int,
) -> GrepResult | None:
    """Search with ripgrep picking the files; None when it cannot (use Python).

    ``load`` reads a virtual path's bytes safely (see :class:`_Candidates`).
    """
    command = [
        rg,
        "--files-with-matches",
        "--null",
        "--no-config",
        "--hidden",
        "--no-ignore",
        "--sort=path",
        "--crlf",
        # Invalid UTF-8 becomes U+FFFD, as in Python's decode(errors="replace"),
        # so that "." matches it on both paths.
        "--encoding=utf-8",
        f"--max-filesize={max_bytes}",
        "--regexp",
        regex.ripgrep,
        "--",
        host,
    ]
    output = _Candidates(regex=regex, to_virtual=to_virtual, load=load, max_matches=max_matches)
    named = False
    async with await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None
        finished = False
        try:
            rest = b""  # of a name not complete yet
            async for chunk in process.stdout:
                *complete, rest = (rest + chunk).split(b"\0")
                named = named or bool(complete)
                if complete and not await anyio.to_thread.run_sync(output.feed, complete):
                    break
            else:
                finished = True
        finally:
            if not finished:
                # Not Process.kill(): it polls first, and a poll that reaps a
                # child which has just exited leaves asyncio's child watcher to
                # warn of an unknown child and report 255. A zombie takes the
                # signal harmlessly.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
    if output.truncated:
        return GrepResult(matches=tuple(output.matches[:max_matches]), truncated=True)
    if process.returncode == 2 and not named:
        # An error and no file named: the pattern was refused (or every file
        # failed): Python's search gives the right answer either way.
        return None
    return GrepResult(matches=tuple(output.matches), truncated=False)

"""Grep over a folder on disk: ripgrep when installed, the same in Python otherwise.

Both paths give identical results: the same files (no symlinks followed while
walking, dotfiles included, files with a NUL byte (UTF-16 ones too) or over the
size limit skipped, names that are not UTF-8 left out), the same line
splitting, the same order (a sorted tree walk, which is ripgrep's
``--sort path``) and the same truncation. Both match in linear time: ripgrep
with its default engine, given the pattern as translated for RE2 (see
``_regex``), and Python through RE2. Every line ripgrep reports is checked again
with RE2, so a difference between the engines can only drop a line, never add
one. A pattern ripgrep cannot compile falls back to Python.

Nothing here runs a pattern or parses ripgrep's output on the event loop: that
happens in worker threads, chunk by chunk.
"""

from __future__ import annotations

import base64
import json
import os
import stat as stat_module
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from deepactors._core.threads import StopFlag

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


def _starts_with_bom(host: str) -> bool:
    try:
        fd = os.open(host, FILE_FLAGS)
    except OSError:
        return False
    with open(fd, "rb") as f:
        return f.read(3).startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"))


def _load(host: str, max_bytes: int) -> bytes | None:
    try:
        return _read_text(os.open(host, FILE_FLAGS), max_bytes)
    except OSError:
        return None


def _search_bytes(regex: LinePattern, virtual: str, data: bytes | None) -> list[GrepMatch]:
    if data is None:
        return []
    text = data.decode("utf-8", errors="replace")
    return [
        GrepMatch(path=virtual, line_number=n, line=line) for n, line in regex.search_text(text)
    ]


def _text(field: Mapping[str, object]) -> str:
    if "text" in field:
        return str(field["text"])
    encoded = field.get("bytes")
    raw = base64.b64decode(encoded if isinstance(encoded, str) else "")
    return raw.decode("utf-8", errors="replace")


def _path(field: Mapping[str, object]) -> str | None:
    # A path ripgrep gives as "bytes" is not UTF-8: no agent path names it (the
    # Python walk leaves such names out too).
    return str(field["text"]) if "text" in field else None


def _line(text: str) -> str:
    if text.endswith("\n"):
        text = text[:-1]
    return text[:-1] if text.endswith("\r") else text


@dataclass(slots=True, kw_only=True)
class _RipgrepOutput:
    """ripgrep's JSON messages, read chunk by chunk in a worker thread."""

    regex: LinePattern
    to_virtual: PathMapper
    max_matches: int
    max_bytes: int
    matches: list[GrepMatch] = field(default_factory=list)
    pending: list[GrepMatch] = field(default_factory=list)  # until the file proves to be text
    truncated: bool = False
    finished: bool = False

    def feed(self, lines: list[bytes]) -> bool:
        """Take complete JSON lines; False once more than ``max_matches`` were found."""
        for raw in lines:
            if not raw:
                continue
            message = json.loads(raw)
            kind, data = message["type"], message["data"]
            if kind == "begin":
                self.pending = []
            elif kind == "match":
                path = _path(data["path"])
                virtual = None if path is None else self.to_virtual(path)
                line = _line(_text(data["lines"]))
                if virtual is not None and self.regex.search_line(line):
                    self.pending.append(
                        GrepMatch(path=virtual, line_number=data["line_number"], line=line)
                    )
            elif kind == "end":
                # A NUL byte makes the whole file binary, even when ripgrep found
                # it only after some matches.
                if self.pending and data.get("binary_offset") is None:
                    found = _path(data["path"])
                    if found is not None and _starts_with_bom(found):
                        # ripgrep decodes a file with a byte-order mark (UTF-16 too);
                        # Python does not: search it as Python would.
                        loaded = _load(found, self.max_bytes)
                        self.pending = _search_bytes(self.regex, self.pending[0].path, loaded)
                    self.matches.extend(self.pending)
                self.pending = []
                if len(self.matches) > self.max_matches:
                    self.truncated = True
                    return False
            elif kind == "summary":
                self.finished = True
        return True


async def grep_with_ripgrep(
    rg: str,
    host: str,
    regex: LinePattern,
    to_virtual: PathMapper,
    *,
    max_matches: int,
    max_bytes: int,
) -> GrepResult | None:
    """Search with ripgrep; None when it cannot take the pattern (use Python)."""
    command = [
        rg,
        "--json",
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
    output = _RipgrepOutput(
        regex=regex, to_virtual=to_virtual, max_matches=max_matches, max_bytes=max_bytes
    )
    async with await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None
        try:
            parts: list[bytes] = []  # of a line not complete yet
            async for chunk in process.stdout:
                if b"\n" not in chunk:
                    parts.append(chunk)
                    continue
                *complete, rest = b"".join([*parts, chunk]).split(b"\n")
                parts = [rest]
                if not await anyio.to_thread.run_sync(output.feed, complete):
                    break
        finally:
            if process.returncode is None:
                process.kill()
    if output.truncated:
        return GrepResult(matches=tuple(output.matches[:max_matches]), truncated=True)
    if not output.finished and process.returncode == 2:
        return None  # ripgrep refused the pattern before searching
    return GrepResult(matches=tuple(output.matches), truncated=False)

"""Grep over a folder on disk: ripgrep when installed, the same in Python otherwise.

Both paths give identical results: the same files (no symlinks followed while
walking, dotfiles included, files with a NUL byte (UTF-16 ones too) or over the
size limit skipped, names that are not UTF-8 left out), the same line
splitting, the same order (a sorted tree walk, which is ripgrep's
``--sort path``) and the same truncation. ripgrep runs with PCRE2 (the regex
dialect nearest to Python's) and every line it reports is checked again with
Python's :mod:`re`, so a difference between the dialects can only drop a line,
never add one. A pattern ripgrep cannot compile falls back to Python.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat as stat_module
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import anyio

from ._fdpath import DIR_FLAGS, FILE_FLAGS, Anchor
from ._paths import join
from ._protocol import GrepMatch, GrepResult
from ._text import grep_text

__all__ = ["grep_file_with_python", "grep_with_python", "grep_with_ripgrep", "walk_files"]

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
    regex: re.Pattern[str],
    accept: Callable[[str], bool],
    *,
    max_matches: int,
    max_bytes: int,
) -> GrepResult:
    """Search a file or a folder on disk; runs in a worker thread.

    Files that vanish, change type or cannot be opened meanwhile are skipped,
    as ripgrep skips them; FIFOs and devices are never opened in a blocking way.
    """
    matches: list[GrepMatch] = []

    def search(virtual: str, data: bytes) -> bool:
        for number, line in grep_text(regex, data.decode("utf-8", errors="replace")):
            if len(matches) == max_matches:
                return False
            matches.append(GrepMatch(path=virtual, line_number=number, line=line))
        return True

    with anchor.target(path, last="dir") as folder:
        for fd, name, virtual in walk_files(folder.parent_fd, path):
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
    regex: re.Pattern[str],
    accept: Callable[[str], bool],
    *,
    max_matches: int,
    max_bytes: int,
) -> GrepResult:
    """Search one file on disk; runs in a worker thread."""
    matches: list[GrepMatch] = []
    data = _read_text(anchor.open_file(path)[0], max_bytes) if accept(path) else None
    if data is not None:
        for number, line in grep_text(regex, data.decode("utf-8", errors="replace")):
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


def _search_bytes(regex: re.Pattern[str], virtual: str, data: bytes | None) -> list[GrepMatch]:
    if data is None:
        return []
    text = data.decode("utf-8", errors="replace")
    return [GrepMatch(path=virtual, line_number=n, line=line) for n, line in grep_text(regex, text)]


def _text(field: dict[str, Any]) -> str:
    if "text" in field:
        return str(field["text"])
    raw = base64.b64decode(field.get("bytes", ""))
    return raw.decode("utf-8", errors="replace")


def _path(field: dict[str, Any]) -> str | None:
    # A path ripgrep gives as "bytes" is not UTF-8: no agent path names it (the
    # Python walk leaves such names out too).
    return str(field["text"]) if "text" in field else None


def _line(text: str) -> str:
    if text.endswith("\n"):
        text = text[:-1]
    return text[:-1] if text.endswith("\r") else text


async def grep_with_ripgrep(
    rg: str,
    host: str,
    regex: re.Pattern[str],
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
        "--pcre2",
        "--crlf",
        f"--max-filesize={max_bytes}",
        "--regexp",
        regex.pattern,
        "--",
        host,
    ]
    matches: list[GrepMatch] = []
    pending: list[GrepMatch] = []  # of the current file, kept until it proves to be text
    truncated = False
    finished = False
    async with await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None
        try:
            buffer = b""
            async for chunk in process.stdout:
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for raw in complete:
                    if not raw:
                        continue
                    message = json.loads(raw)
                    kind, data = message["type"], message["data"]
                    if kind == "begin":
                        pending = []
                    elif kind == "match":
                        path = _path(data["path"])
                        virtual = None if path is None else to_virtual(path)
                        line = _line(_text(data["lines"]))
                        if virtual is not None and regex.search(line):
                            pending.append(
                                GrepMatch(path=virtual, line_number=data["line_number"], line=line)
                            )
                    elif kind == "end":
                        # A NUL byte makes the whole file binary, even when ripgrep
                        # found it only after some matches.
                        if pending and data.get("binary_offset") is None:
                            found = _path(data["path"])
                            if found is not None and await anyio.to_thread.run_sync(
                                _starts_with_bom, found
                            ):
                                # ripgrep decodes a file with a byte-order mark (UTF-16
                                # too); Python does not: search it as Python would.
                                pending = _search_bytes(
                                    regex,
                                    pending[0].path,
                                    await anyio.to_thread.run_sync(_load, found, max_bytes),
                                )
                            matches.extend(pending)
                        pending = []
                        if len(matches) > max_matches:
                            truncated = True
                            break
                    elif kind == "summary":
                        finished = True
                if truncated:
                    break
        finally:
            if process.returncode is None:
                process.kill()
    if truncated:
        return GrepResult(matches=tuple(matches[:max_matches]), truncated=True)
    if not finished and process.returncode == 2:
        return None  # ripgrep refused the pattern before searching
    return GrepResult(matches=tuple(matches), truncated=False)

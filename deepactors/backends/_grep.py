"""Grep over a folder on disk: ripgrep when installed, the same in Python otherwise.

Both paths give identical results: the same files (no symlinks followed while
walking, dotfiles included, files with a NUL byte or over the size limit
skipped), the same line splitting, the same order (a sorted tree walk, which is
ripgrep's ``--sort path``) and the same truncation. ripgrep runs with PCRE2 (the
regex dialect nearest to Python's) and every line it reports is checked again
with Python's :mod:`re`, so a difference between the dialects can only drop a
line, never add one. A pattern ripgrep cannot compile falls back to Python.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import anyio

from ._protocol import GrepMatch, GrepResult
from ._text import grep_text

__all__ = ["grep_with_python", "grep_with_ripgrep", "walk_files"]

# Maps a host path found by the search to its virtual path, or None to skip it
# (a glob filter, a name that is not valid UTF-8, ...).
PathMapper = Callable[[str], "str | None"]


def walk_files(folder: str) -> Iterator[os.DirEntry[str]]:
    """Regular files below ``folder`` in sorted tree order, symlinks not followed."""
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from walk_files(entry.path)
        elif entry.is_file(follow_symlinks=False):
            yield entry


def grep_with_python(
    host: str,
    regex: re.Pattern[str],
    to_virtual: PathMapper,
    *,
    max_matches: int,
    max_bytes: int,
) -> GrepResult:
    """Search a file or a folder on disk; runs in a worker thread."""
    if os.path.isdir(host):
        candidates = [(e.path, e.stat(follow_symlinks=False).st_size) for e in walk_files(host)]
    else:
        candidates = [(host, os.stat(host).st_size)]
    matches: list[GrepMatch] = []
    for file, size in candidates:
        virtual = to_virtual(file)
        if virtual is None or size > max_bytes:
            continue
        try:
            with open(file, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError:
            continue  # vanished or unreadable meanwhile: skipped, as ripgrep does
        if b"\0" in data or len(data) > max_bytes:
            continue
        for number, line in grep_text(regex, data.decode("utf-8", errors="replace")):
            if len(matches) == max_matches:
                return GrepResult(matches=tuple(matches), truncated=True)
            matches.append(GrepMatch(path=virtual, line_number=number, line=line))
    return GrepResult(matches=tuple(matches), truncated=False)


def _text(field: dict[str, Any]) -> str | None:
    if "text" in field:
        return str(field["text"])
    raw = base64.b64decode(field.get("bytes", ""))
    return raw.decode("utf-8", errors="replace")


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
                        path = _text(data["path"])
                        virtual = None if path is None else to_virtual(path)
                        line = _line(_text(data["lines"]) or "")
                        if virtual is not None and regex.search(line):
                            pending.append(
                                GrepMatch(path=virtual, line_number=data["line_number"], line=line)
                            )
                    elif kind == "end":
                        # A NUL byte makes the whole file binary, even when ripgrep
                        # found it only after some matches.
                        if data.get("binary_offset") is None:
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

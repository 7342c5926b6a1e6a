"""Text helpers shared by every backend: lines, edits, regular expressions.

Keeping them in one place is what makes the backends agree to the byte on line
numbers, edits and grep output.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

from deepactors.errors import EditError, InvalidPattern

__all__ = ["apply_edit", "compile_pattern", "grep_text", "split_lines"]


def split_lines(content: str) -> list[str]:
    """Split on ``\\n`` only, dropping each line's ``\\n`` or ``\\r\\n``.

    Only ``\\n`` counts (not ``str.splitlines``' ``\\r``, ``\\x0c``, ``\\u2028``...)
    so that line numbers agree with ripgrep's.
    """
    if not content:
        return []
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def apply_edit(
    content: str, old: str, new: str, *, replace_all: bool, path: str
) -> tuple[str, int]:
    """Replace ``old`` by ``new`` in ``content``; returns the new text and the count.

    The search is exact. When ``old`` is not found as given and its line endings
    differ from the file's (the model writes ``\\n``, the file has ``\\r\\n``, or the
    other way round), ``old`` and ``new`` are converted to the file's ending and
    tried again. Only the matched spans change, so the rest of the file, mixed
    endings and final newline included, stays byte for byte.

    Raises:
        EditError: ``old`` is empty, equals ``new``, is missing, or is not unique
            without ``replace_all``.
    """
    if not old:
        raise EditError("old string is empty; use write to create or replace a file", path=path)
    if old == new:
        raise EditError("old and new strings are the same; nothing to change", path=path)
    count = content.count(old)
    if count == 0:
        plain_old = old.replace("\r\n", "\n")
        plain_new = new.replace("\r\n", "\n")
        if "\r\n" in content and "\n" in plain_old:
            old, new = plain_old.replace("\n", "\r\n"), plain_new.replace("\n", "\r\n")
            count = content.count(old)
        if count == 0 and "\r\n" in old:
            old, new = plain_old, plain_new
            count = content.count(old)
    if count == 0:
        raise EditError(
            f"old string not found in {path}; read the file again and copy the text exactly",
            path=path,
        )
    if count > 1 and not replace_all:
        raise EditError(
            f"old string occurs {count} times in {path}; add surrounding lines to make it "
            "unique, or set replace_all",
            path=path,
        )
    if replace_all:
        return content.replace(old, new), count
    return content.replace(old, new, 1), 1


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a grep pattern, turning a bad one into :class:`InvalidPattern`."""
    try:
        # A pattern like "[[:alpha:]]" only warns (FutureWarning); for the model it
        # is as much a mistake as a syntax error, and tests run with warnings as errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return re.compile(pattern)
    except re.error as exc:
        raise InvalidPattern(f"invalid regular expression {pattern!r}: {exc}") from None


def grep_text(regex: re.Pattern[str], content: str) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` for each line of ``content`` that ``regex`` matches."""
    for number, line in enumerate(split_lines(content), 1):
        if regex.search(line):
            yield number, line

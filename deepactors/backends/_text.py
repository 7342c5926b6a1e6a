"""Text helpers shared by every backend: lines and edits.

Keeping them in one place is what makes the backends agree to the byte on line
numbers, edits and grep output.
"""

from __future__ import annotations

import re

from deepactors.errors import EditError

__all__ = ["apply_edit", "split_lines"]


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


def line_ending(content: str) -> str:
    """The file's line ending: that of its first line (``\\n`` when it has none)."""
    first = content.find("\n")
    return "\r\n" if first > 0 and content[first - 1] == "\r" else "\n"


def _converted(text: str, ending: str) -> str:
    plain = text.replace("\r\n", "\n")
    return plain if ending == "\n" else plain.replace("\n", "\r\n")


def _exact(text: str) -> re.Pattern[str]:
    """A pattern for ``text`` (one ending throughout) whose ``\\n`` is never half a ``\\r\\n``."""
    if "\r\n" in text:
        return re.compile(re.escape(text))
    return re.compile("(?<!\r)\n".join(re.escape(part) for part in text.split("\n")))


def apply_edit(
    content: str, old: str, new: str, *, replace_all: bool, path: str
) -> tuple[str, int]:
    """Replace ``old`` by ``new`` in ``content``; returns the new text and the count.

    The file's line ending is that of its first line. ``old`` and ``new`` are
    converted to it before the search (the model writes ``\\n``, the file may
    have ``\\r\\n``), so what is written has the file's ending. A ``\\n``
    never matches the ``\\n`` inside a ``\\r\\n``. Only when that finds nothing
    (a file with mixed endings) are both tried with the other ending, so an
    edit of the file's odd lines keeps their ending. Only the matched spans
    change: the rest of the file, final newline included, stays byte for byte.

    Raises:
        EditError: ``old`` is empty, equals ``new``, is missing, or is not unique
            without ``replace_all``.
    """
    if not old:
        raise EditError("old string is empty; use write to create or replace a file", path=path)
    if old == new:
        raise EditError("old and new strings are the same; nothing to change", path=path)
    ending = line_ending(content)
    count = 0
    for candidate in (ending, "\n" if ending == "\r\n" else "\r\n"):
        pattern = _exact(_converted(old, candidate))
        replacement = _converted(new, candidate)
        count = len(pattern.findall(content))
        if count or "\n" not in old:
            break
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
    changed = pattern.sub(lambda _: replacement, content, count=0 if replace_all else 1)
    return changed, count if replace_all else 1

"""Glob patterns over virtual paths, shared by every backend.

Semantics (documented on :class:`~deepactors.backends.Backend`): ``*`` and ``?``
stay inside one path segment, ``[...]`` is a character class (``[!...]`` negated),
a whole segment ``**`` matches zero or more folders. A wildcard never matches a
leading dot, as in a shell: a segment pattern matches a dot-name only when the
pattern segment itself starts with ``.``. That keeps ``**/*.py`` out of ``.git``
and ``.venv`` without any ignore files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deepactors.errors import InvalidPath

__all__ = ["GlobMatcher", "compile_glob", "name_filter", "strip_mount"]


def _translate_segment(segment: str) -> str:
    out: list[str] = [] if segment.startswith(".") else [r"(?!\.)"]
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i
            if j < n and segment[j] in "!^":
                j += 1
            if j < n and segment[j] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "[", as fnmatch does
                out.append(r"\[")
                continue
            body = segment[i:j].replace("\\", "\\\\")
            i = j + 1
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append(f"(?!/)[{body}]")  # a negated class must not cross "/"
        else:
            out.append(re.escape(c))
    return "".join(out)


_ANY_FOLDERS = r"(?:(?!\.)[^/]+/)*"
_ANY_NAME = r"(?!\.)[^/]+"


def _segments(pattern: str) -> list[str]:
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise InvalidPath(f"glob pattern {pattern!r} contains '..'", path=pattern)
    if "\0" in pattern:
        raise InvalidPath("glob pattern contains a NUL byte", path=pattern)
    return segments


def _compile(regex: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(regex, re.DOTALL)
    except re.error as exc:  # a class like "[z-a]": the range is reversed
        raise InvalidPath(
            f"glob pattern {pattern!r} is not valid: a character class like [a-z] must "
            f"name its range low to high ({exc})",
            path=pattern,
        ) from None


@dataclass(frozen=True, slots=True)
class GlobMatcher:
    """A compiled glob over paths relative to some folder (no leading slash).

    Attributes:
        regex: The whole-path regular expression.
        max_depth: Most segments a matching path can have; None with ``**``.
        dot_segments: True when some pattern segment starts with ``.`` (so a walk
            must enter dot-folders).
    """

    regex: re.Pattern[str]
    max_depth: int | None
    dot_segments: bool

    def matches(self, relative: str) -> bool:
        """Whether a relative path (``a/b.txt``) matches."""
        return self.regex.fullmatch(relative) is not None


def compile_glob(pattern: str) -> GlobMatcher:
    """Compile a glob matched against relative paths (a leading ``/`` is ignored).

    Raises:
        InvalidPath: The pattern contains ``..`` segments or a NUL byte, or a
            character class that is not valid (``[z-a]``).
    """
    segments = _segments(pattern)
    if not segments:
        segments = ["*"]
    parts: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(_ANY_FOLDERS + _ANY_NAME if last else _ANY_FOLDERS)
        else:
            parts.append(_translate_segment(segment) + ("" if last else "/"))
    return GlobMatcher(
        regex=_compile("".join(parts), pattern),
        max_depth=None if "**" in segments else len(segments),
        dot_segments=any(s.startswith(".") for s in segments),
    )


def name_filter(glob: str) -> tuple[GlobMatcher, bool]:
    """A grep ``glob`` filter: the matcher and whether it matches names only.

    A filter without ``/`` (``*.py``) matches the file name at any depth; one with
    ``/`` matches the path relative to the searched folder.
    """
    stripped = glob.strip("/")
    return compile_glob(stripped), "/" not in stripped


def _segment_matches(pattern_segment: str, name: str) -> bool:
    regex = _compile(_translate_segment(pattern_segment), pattern_segment)
    return regex.fullmatch(name) is not None


def strip_mount(pattern: str, mount: tuple[str, ...]) -> list[str]:
    """The patterns that, inside a mount, match what ``pattern`` matches there.

    ``pattern`` is relative to a folder and ``mount`` is the mount's path relative
    to that same folder, as segments. ``**/*.md`` over mount ``("memories",)``
    gives ``["**/*.md"]``; ``memories/*.md`` gives ``["*.md"]``; ``src/*`` gives
    ``[]``. Used by :class:`~deepactors.backends.CompositeBackend` to fan a glob
    out to the backends mounted below the searched folder.
    """
    results: set[tuple[str, ...]] = set()

    def walk(pat: tuple[str, ...], rest: tuple[str, ...]) -> None:
        if not rest:
            if pat:
                results.add(pat)
            return
        if not pat:
            return
        head = pat[0]
        if head == "**":
            walk(pat[1:], rest)  # "**" matches no folder here
            if not rest[0].startswith("."):
                walk(pat, rest[1:])  # or swallows this one and maybe more
        elif _segment_matches(head, rest[0]):
            walk(pat[1:], rest[1:])

    walk(tuple(_segments(pattern)) or ("*",), mount)
    return sorted("/".join(p) for p in results)

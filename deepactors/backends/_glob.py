"""Glob patterns over virtual paths, shared by every backend.

Semantics (documented on :class:`~deepactors.backends.Backend`): ``*`` and ``?``
stay inside one path segment, ``[...]`` is a character class (``[!...]`` negated),
a whole segment ``**`` matches zero or more folders, and ``{a,b}`` within a segment
matches either alternative (``*.{py,md}``, nested braces too, as a shell expands
them). A wildcard never matches a
leading dot, as in a shell: a segment pattern matches a dot-name only when the
pattern segment itself starts with ``.``. That keeps ``**/*.py`` out of ``.git``
and ``.venv`` without any ignore files.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from deepactors.errors import InvalidPath, InvalidPattern

from ._regex import compile_re2

__all__ = [
    "MAX_BRACE_VARIANTS",
    "MAX_GLOB_CHARS",
    "GlobMatcher",
    "compile_glob",
    "expand_braces",
    "name_filter",
    "strip_mount",
]

MAX_GLOB_CHARS = 10_000
"""Longest glob pattern accepted."""

# Globs compile to RE2 (linear-time matching: ``*a*a*a*a*b`` against a long name
# costs no more than ``*b``), which has no lookahead for "a wildcard does not
# match a leading dot". So the leading dot of every path segment is replaced by
# this marker before matching (paths never hold a NUL), wildcards never match the
# marker, and a pattern segment that starts with "." starts with the marker.
_MARK = "\0"
_RE2_META = set("\\.+*?()|[]{}^$")


def _mark(relative: str) -> bytes:
    """A relative path as the matcher sees it: each segment's leading dot marked."""
    if "." in relative:
        relative = ("/" + relative).replace("/.", "/" + _MARK)[1:]
    return relative.encode("utf-8", "surrogatepass")


def _char(c: str) -> str:
    return "\\" + c if c in _RE2_META else c


def _class_char(c: str) -> str:
    return f"\\x{{{ord(c):x}}}"


def _translate_class(body: str, pattern: str) -> str:
    """The body of ``[...]`` (after ``!``/``^``) as an RE2 class never matching ``/``."""
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    items: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            k += 3
            if low > high:
                raise InvalidPath(
                    f"glob pattern {pattern!r} is not valid: a character class like [a-z] "
                    f"must name its range low to high ([{low}-{high}])",
                    path=pattern,
                )
            # A range over "/" would let the class cross a segment: leave "/" out.
            if low < "/" < high:
                items += [
                    f"{_class_char(low)}-{_class_char('.')}",
                    f"{_class_char('0')}-{_class_char(high)}",
                ]
            elif low == "/" == high:
                continue
            else:
                low = "0" if low == "/" else low
                high = "." if high == "/" else high
                items.append(f"{_class_char(low)}-{_class_char(high)}")
        else:
            if body[k] != "/":
                items.append(_class_char(body[k]))
            k += 1
    if negated:
        return "[^/\\x00" + "".join(items) + "]"
    return "[" + "".join(items) + "]" if items else "[^\\x00-\\x{10ffff}]"  # matches nothing


MAX_BRACE_VARIANTS = 256
"""Most alternatives one segment's braces may expand to (``{a,b}{c,d}`` is 4)."""


def _first_alternation(segment: str) -> tuple[int, int] | None:
    """The first brace pair with a comma of its own, in one pass (classes skipped).

    A brace without a comma is a literal, as in a shell; returns None when no
    brace pair has a comma.
    """
    stack: list[list[int]] = []  # [start, has a comma]
    found: tuple[int, int] | None = None
    k = 0
    while k < len(segment):
        c = segment[k]
        if c == "[":
            end = segment.find("]", k + 2)
            k = end if end != -1 else k
        elif c == "{":
            stack.append([k, 0])
        elif c == "," and stack:
            stack[-1][1] = 1
        elif c == "}" and stack:
            start, comma = stack.pop()
            if comma and (found is None or start < found[0]):
                found = (start, k)
        k += 1
    return found


def _alternatives(body: str) -> list[str]:
    """The comma-separated parts of a brace body, split at top level only."""
    parts, depth, last = [], 0, 0
    for k, c in enumerate(body):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[last:k])
            last = k + 1
    parts.append(body[last:])
    return parts


def expand_braces(segment: str, pattern: str = "") -> list[str]:
    """A segment's brace alternatives, expanded: ``*.{py,md}`` -> ``*.py``, ``*.md``.

    A brace without a comma, or one that does not close, is a literal, as in a shell.

    Raises:
        InvalidPath: The braces expand to more than :data:`MAX_BRACE_VARIANTS`.
    """
    pair = _first_alternation(segment)
    if pair is not None:
        start, end = pair
        parts = _alternatives(segment[start + 1 : end])
        if len(parts) > 1:
            head, tail = segment[:start], segment[end + 1 :]
            out: list[str] = []
            for part in parts:
                for variant in expand_braces(head + part + tail, pattern):
                    out.append(variant)
                    if len(out) > MAX_BRACE_VARIANTS:
                        raise InvalidPath(
                            f"glob pattern {pattern or segment!r}: its braces expand to more "
                            f"than {MAX_BRACE_VARIANTS} alternatives",
                            path=pattern or segment,
                        )
            return list(dict.fromkeys(out))
    return [segment]


def _translate_segment(segment: str, pattern: str) -> str:
    variants = expand_braces(segment, pattern) if "{" in segment else [segment]
    if len(variants) == 1:
        return _translate_plain(variants[0], pattern)
    return "(?:" + "|".join(_translate_plain(v, pattern) for v in variants) + ")"


def _translate_plain(segment: str, pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(segment)
    if segment.startswith("."):
        out.append("\\x00")
        i = 1
    while i < n:
        c = segment[i]
        i += 1
        if c == "*":
            out.append("[^/\\x00]*")
        elif c == "?":
            out.append("[^/\\x00]")
        elif c == "[":
            j = i
            if j < n and segment[j] in "!^":
                j += 1
            if j < n and segment[j] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "[", as fnmatch does
                out.append("\\[")
                continue
            out.append(_translate_class(segment[i:j], pattern))
            i = j + 1
        else:
            out.append(_char(c))
    return "".join(out)


# "**": any number of folders, none of them a dot-folder.
_ANY_FOLDERS = "(?:[^/\\x00][^/]*/)*"
_ANY_NAME = "[^/\\x00][^/]*"


def _segments(pattern: str) -> list[str]:
    if not isinstance(pattern, str):
        raise InvalidPath(f"a glob pattern must be a string, not {type(pattern).__name__}")
    if len(pattern) > MAX_GLOB_CHARS:
        raise InvalidPath(
            f"the glob pattern is {len(pattern):,} characters long; at most "
            f"{MAX_GLOB_CHARS:,} are accepted",
            path=pattern[:100],
        )
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise InvalidPath(f"glob pattern {pattern!r} contains '..'", path=pattern)
    if "\0" in pattern:
        raise InvalidPath("glob pattern contains a NUL byte", path=pattern)
    # "**/**" means what "**" means; collapsing keeps the regex and strip_mount small.
    collapsed: list[str] = []
    for s in segments:
        if not (s == "**" and collapsed and collapsed[-1] == "**"):
            collapsed.append(s)
    return collapsed


@dataclass(frozen=True, slots=True)
class GlobMatcher:
    """A compiled glob over paths relative to some folder (no leading slash).

    Attributes:
        regex: The whole-path RE2 expression (over paths with leading dots marked).
        max_depth: Most segments a matching path can have; None with ``**``.
        dot_segments: True when some pattern segment starts with ``.`` (so a walk
            must enter dot-folders).
    """

    regex: Any
    max_depth: int | None
    dot_segments: bool

    def matches(self, relative: str) -> bool:
        """Whether a relative path (``a/b.txt``) matches."""
        return self.regex.fullmatch(_mark(relative)) is not None


def compile_glob(pattern: str) -> GlobMatcher:
    """Compile a glob matched against relative paths (a leading ``/`` is ignored).

    Raises:
        InvalidPath: The pattern contains ``..`` segments or a NUL byte, a
            character class that is not valid (``[z-a]``), or is too long.
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
            parts.append(_translate_segment(segment, pattern) + ("" if last else "/"))
    return GlobMatcher(
        regex=_compile("".join(parts), pattern),
        max_depth=None if "**" in segments else len(segments),
        dot_segments=any(v.startswith(".") for s in segments for v in expand_braces(s, pattern)),
    )


def _compile(regex: str, pattern: str) -> Any:
    try:
        return compile_re2("(?s)" + regex, source=pattern)
    except InvalidPattern as exc:
        raise InvalidPath(f"glob {exc}", path=pattern) from None


def name_filter(glob: str) -> tuple[GlobMatcher, bool]:
    """A grep ``glob`` filter: the matcher and whether it matches names only.

    A filter without ``/`` (``*.py``) matches the file name at any depth; one with
    ``/`` matches the path relative to the searched folder.
    """
    if not isinstance(glob, str):
        raise InvalidPath(f"a glob filter must be a string, not {type(glob).__name__}")
    stripped = glob.strip("/")
    return compile_glob(stripped), "/" not in stripped


@functools.lru_cache(maxsize=256)
def _segment_regex(pattern_segment: str) -> Any:
    return _compile(_translate_segment(pattern_segment, pattern_segment), pattern_segment)


def strip_mount(pattern: str, mount: tuple[str, ...]) -> list[str]:
    """The patterns that, inside a mount, match what ``pattern`` matches there.

    ``pattern`` is relative to a folder and ``mount`` is the mount's path relative
    to that same folder, as segments. ``**/*.md`` over mount ``("memories",)``
    gives ``["**/*.md"]``; ``memories/*.md`` gives ``["*.md"]``; ``src/*`` gives
    ``[]``. Used by :class:`~deepactors.backends.CompositeBackend` to fan a glob
    out to the backends mounted below the searched folder.

    Runs in time linear in ``len(pattern) * len(mount)``: the states are positions
    in the pattern, advanced one mount segment at a time.
    """
    segments = tuple(_segments(pattern)) or ("*",)
    states = {0}
    for name in mount:
        # Before each mount segment a "**" may also match no folder at all.
        reachable: set[int] = set()
        for i in states:
            while i < len(segments):
                reachable.add(i)
                if segments[i] != "**":
                    break
                i += 1
        following: set[int] = set()
        for i in reachable:
            head = segments[i]
            if head == "**":
                if not name.startswith("."):
                    following.add(i)  # swallows this folder, and maybe more
            elif _segment_regex(head).fullmatch(_mark(name)) is not None:
                following.add(i + 1)
        states = following
    return sorted("/".join(segments[i:]) for i in states if i < len(segments))

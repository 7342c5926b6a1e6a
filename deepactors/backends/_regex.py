"""Grep patterns, matched by RE2 in time linear in the text.

A pattern from a model (or from a prompt injection it read) must never be able
to stall the process: Python's :mod:`re` backtracks, and ``(a+)+$`` over a line
of 50,000 ``a`` never finishes. RE2 (through ``google-re2``) does not backtrack:
a search costs time linear in the text, and the binding releases the GIL while
it matches. Patterns are written in Python's dialect (see ``_regex_translate``
for what is translated and what is refused).

Each line is matched on its own (``^`` and ``$`` at its ends, ``\\r\\n`` endings
dropped), but a text is searched in a few calls, not one per line: RE2 runs over
the whole text with ``^``/``$`` at line ends and with no match able to cross a
newline, which finds exactly the lines a line-by-line search would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import re2

from deepactors._core.threads import StopFlag
from deepactors.errors import InvalidPattern

from ._regex_translate import MAX_PATTERN_CHARS, translate
from ._text import split_lines

__all__ = ["MAX_PATTERN_CHARS", "LinePattern", "Stopped", "compile_pattern", "compile_re2"]

# A compiled program over this size is refused. Compiling holds the GIL (the
# binding releases it only while matching), and compile time grows with the
# program: this keeps the worst compile to a few tens of milliseconds. (About
# fifty Unicode ``\w`` in a row fit.)
_PROGRAM_BUDGET = 1 << 20
# The budget of the compile that is kept: the program is known to be small by
# then, and the rest is the DFA's cache, which keeps big alternations fast.
_SEARCH_BUDGET = 8 << 20
# Text searched per RE2 call: between two windows a search checks whether it
# should stop (its caller was cancelled).
_WINDOW = 1 << 16


def _options(max_mem: int, *, never_nl: bool) -> Any:
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False  # the error becomes an exception; RE2 would print it too
    options.never_nl = never_nl
    return options


def compile_re2(regex: str, *, source: str, never_nl: bool = False) -> Any:
    """Compile an RE2 pattern in two steps, bounding the time the GIL is held.

    The first compile, with a small budget, refuses a program that would take
    long to build; the second gives the accepted one room for its DFA cache.

    Raises:
        InvalidPattern: RE2 refuses the pattern (``source`` is what is quoted).
    """
    try:
        re2.compile(regex, _options(_PROGRAM_BUDGET, never_nl=never_nl))
        return re2.compile(regex, _options(_SEARCH_BUDGET, never_nl=never_nl))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        if "pattern too large" in str(reason):
            reason = "the pattern is too large for the regex engine; make it smaller"
        raise InvalidPattern(f"invalid regular expression {source!r}: {reason}") from None
    except (UnicodeEncodeError, TypeError) as exc:
        raise InvalidPattern(f"invalid regular expression {source!r}: {exc}") from None


class Stopped(Exception):
    """A search saw its :class:`StopFlag` set (its caller is gone)."""


@dataclass(frozen=True, slots=True, eq=False)
class LinePattern:
    """A grep pattern compiled for RE2 (see the module docstring).

    Attributes:
        source: The pattern as given.
        ripgrep: The same pattern for ripgrep's default engine.
    """

    source: str
    ripgrep: str
    _regex: Any

    def search_line(self, line: str) -> bool:
        """Whether the pattern matches in one line (without its ending)."""
        data = line.encode("utf-8", "surrogatepass")
        return self._regex.search(data) is not None

    def search_text(self, content: str, stop: StopFlag | None = None) -> Iterator[tuple[int, str]]:
        """``(line_number, line)`` for each line of ``content`` the pattern matches.

        Lines are those of :func:`split_lines`. Runs in a worker thread; RE2
        releases the GIL while it scans.

        Raises:
            Stopped: ``stop`` was set.
        """
        lines = split_lines(content)
        if not lines:
            return
        data = "\n".join(lines).encode("utf-8", "surrogatepass")
        end = len(data)
        pos = 0
        index = 0  # of the line that starts at pos
        search = self._regex.search
        while index < len(lines):
            if stop is not None and stop.is_set():
                raise Stopped
            window = data.find(b"\n", min(pos + _WINDOW, end))
            window = end if window < 0 else window
            found = search(data, pos, window)
            if found is None:
                index += data.count(b"\n", pos, window) + 1
                pos = window + 1
                continue
            start = found.start()
            index += data.count(b"\n", pos, start)
            yield index + 1, lines[index]
            line_end = data.find(b"\n", start)
            pos = end + 1 if line_end < 0 else line_end + 1
            index += 1


def compile_pattern(pattern: str) -> LinePattern:
    """Compile a grep pattern (Python's regex dialect) for RE2.

    Call it from a worker thread: compiling holds the GIL (for at most a few
    tens of milliseconds, see ``_PROGRAM_BUDGET``).

    Raises:
        InvalidPattern: Malformed, too large, or using a feature RE2 does not
            have (backreferences, lookaround, ...), with a message naming it.
    """
    if not isinstance(pattern, str):
        raise InvalidPattern(f"a pattern must be a string, not {type(pattern).__name__}")
    for_re2, for_ripgrep = translate(pattern)
    # (?m): ^ and $ at line ends; never_nl: no match crosses a line.
    regex = compile_re2("(?m)" + for_re2, source=pattern, never_nl=True)
    return LinePattern(source=pattern, ripgrep=for_ripgrep, _regex=regex)

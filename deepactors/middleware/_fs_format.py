"""How the file tools show backend results to the model.

Pure functions from backend records to text, kept apart from the middleware so
the formats can be read (and tested) in one place. Every format is bounded: the
file tools page or cut their own output, so the large-result eviction never has
to catch them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from ..backends import ExecuteResult, FileInfo, GrepResult, ReadWindow

__all__ = [
    "clip_lines",
    "eviction_notice",
    "format_entries",
    "format_execute",
    "format_grep",
    "format_read",
    "result_path",
    "wrap_long_lines",
]

LARGE_RESULTS_DIR = "/large_tool_results"

# Width of the line-number column: `cat -n` uses 6, which fits a million lines.
_NUMBER_WIDTH = 6


def _budget(max_chars: int | None) -> int | None:
    """Characters left for content once a footer's room is kept out of ``max_chars``.

    Footers are short (a few hundred characters at most), so the whole result,
    footer included, stays within the limit.
    """
    return None if max_chars is None else max_chars - min(400, max_chars // 5)


def _clip(line: str, max_chars: int) -> tuple[str, bool]:
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]} [... clipped, the line has {len(line):,} characters]", True


def format_read(window: ReadWindow, *, max_line_chars: int, max_chars: int | None) -> str:
    """A read window as numbered lines (``     1\\tline``) with a footer when needed.

    The page stops early, at a line boundary, when it would pass ``max_chars``
    (footer included), and the footer then gives the offset that continues from
    there, so a page is never larger than the limit whatever ``limit`` the model
    asked for. A single line longer than that is still shown (clipped at
    ``max_line_chars``), or the page could not advance.

    The caller handles the empty cases (empty file, ``limit=0``, offset past the
    end), which deserve their own notices.
    """
    budget = _budget(max_chars)
    out: list[str] = []
    size = 0
    clipped: list[int] = []
    shown = 0
    for number, line in enumerate(window.lines, start=window.start_line):
        text, was_clipped = _clip(line, max_line_chars)
        row = f"{number:>{_NUMBER_WIDTH}}\t{text}"
        # Always show at least one line, or a page could never advance.
        if budget is not None and shown and size + len(row) + 1 > budget:
            break
        out.append(row)
        size += len(row) + 1
        shown += 1
        if was_clipped:
            clipped.append(number)
    last = window.start_line + shown - 1
    next_offset = last if last < window.total_lines else None
    notes: list[str] = []
    if clipped:
        which = ", ".join(str(n) for n in clipped[:10]) + (", ..." if len(clipped) > 10 else "")
        notes.append(
            f"Line(s) {which} are longer than {max_line_chars:,} characters and were clipped; "
            "grep finds text anywhere in a line."
        )
    if next_offset is not None:
        notes.append(
            f"Showing lines {window.start_line}-{last} of {window.total_lines}. "
            f"Call read_file with offset={next_offset} to continue."
        )
    elif window.start_line > 1:
        notes.append(f"Lines {window.start_line}-{last} of {window.total_lines}: end of file.")
    if notes:
        out.append("")
        out.extend(f"({n})" for n in notes)
    return "\n".join(out)


def clip_lines(lines: Sequence[str], *, max_chars: int | None, what: str) -> str:
    """Join result lines, stopping at a line boundary before ``max_chars``.

    Args:
        lines: The lines of a listing.
        max_chars: Most characters to return (None for no limit).
        what: What to narrow, for the note (for example "the pattern or path").
    """
    budget = _budget(max_chars)
    if budget is None:
        return "\n".join(lines)
    out: list[str] = []
    size = 0
    for line in lines:
        if out and size + len(line) + 1 > budget:
            out.append(
                f"\n(Output cut after {len(out)} of {len(lines)} lines to stay under "
                f"{max_chars:,} characters; narrow {what}.)"
            )
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def format_entries(entries: Sequence[FileInfo], *, limit: int) -> list[str]:
    """Listing lines for ``ls`` and ``glob``: folders end in ``/``, files show a size."""
    lines = [
        f"{e.path.rstrip('/')}/" if e.is_dir else f"{e.path} ({e.size:,} bytes)"
        for e in entries[:limit]
    ]
    if len(entries) > limit:
        lines.append(f"(... and {len(entries) - limit:,} more; narrow the path or pattern)")
    return lines


def format_grep(result: GrepResult, *, mode: str, max_line_chars: int) -> list[str]:
    """Grep result lines in one of the three output modes.

    ``files_with_matches``: one path per line; ``content``: ``path:line:text``
    (ripgrep's layout); ``count``: ``path: n``.
    """
    matches = result.matches
    lines: list[str]
    if mode == "content":
        lines = [f"{m.path}:{m.line_number}:{_clip(m.line, max_line_chars)[0]}" for m in matches]
    else:
        counts: dict[str, int] = {}
        for m in matches:
            counts[m.path] = counts.get(m.path, 0) + 1
        if mode == "count":
            lines = [f"{path}: {n}" for path, n in counts.items()]
        else:
            lines = list(counts)
    if result.truncated:
        lines.append(
            f"(Stopped after {len(matches):,} matching lines; there are more. The list "
            "above is incomplete: narrow the pattern, the path or the glob filter.)"
        )
    return lines


def format_execute(result: ExecuteResult) -> str:
    """A command's output with its exit status on a last line."""
    output = result.output.rstrip("\n")
    # The backend's output already carries its own notes (truncation, timeout);
    # the status line only adds what the output cannot say.
    if result.timed_out:
        status = "[no exit code: the command timed out]"
    elif result.exit_code is None:
        status = "[no exit code: the process did not report one before it was stopped]"
    else:
        status = f"[exit code {result.exit_code}]"
    return f"{output}\n{status}" if output else f"(no output)\n{status}"


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def result_path(tool_call_id: str) -> str:
    """Where an evicted result goes: ``/large_tool_results/<sanitised id>``.

    Provider ids are ``[A-Za-z0-9_-]`` already; anything else is replaced so the
    id can never add folders, climb with ``..`` or hide as a dotfile. An id that
    had to change gets a short hash of the original, so two ids that clean up to
    the same name cannot share a file.
    """
    name = _UNSAFE.sub("_", tool_call_id).lstrip(".")[:120]
    if name != tool_call_id:
        name = f"{name or 'result'}-{hashlib.sha256(tool_call_id.encode()).hexdigest()[:8]}"
    return f"{LARGE_RESULTS_DIR}/{name}"


def wrap_long_lines(text: str, width: int) -> tuple[str, bool]:
    """Split lines longer than ``width`` so read_file can show all of them.

    A tool result is often one huge line (JSON); read_file clips long lines, so
    without this an evicted result could not be read back whole.

    Returns:
        The text and whether any line was split.
    """
    if all(len(line) <= width for line in text.split("\n")):
        return text, False
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
        else:
            out.extend(line[i : i + width] for i in range(0, len(line), width))
    return "\n".join(out), True


def _preview(lines: Sequence[str], width: int) -> str:
    return "\n".join(_clip(line, width)[0] for line in lines)


def eviction_notice(
    text: str, path: str, *, total_lines: int, wrapped: bool, wrap_width: int
) -> str:
    """The short message that replaces an evicted result in the history.

    Args:
        text: The original result.
        path: Where it was saved.
        total_lines: Lines of the saved file (after :func:`wrap_long_lines`).
        wrapped: Whether long lines were split in the saved file.
        wrap_width: The width they were split at.
    """
    lines = text.split("\n")
    head, tail = lines[:10], lines[-5:] if len(lines) > 15 else []
    parts = [
        f"This result was too large for the conversation ({len(text):,} characters), so it "
        f"was saved to {path} ({total_lines:,} lines).",
        f'Page through it with read_file(file_path="{path}", offset=0, limit=100), raising '
        f'the offset for each page, or search it with grep(pattern, path="{path}", '
        'output_mode="content").',
    ]
    if wrapped:
        parts.append(f"Lines longer than {wrap_width:,} characters were split in the file.")
    parts.append(f"\nFirst lines:\n{_preview(head, 200)}")
    if tail:
        parts.append(f"...\nLast lines:\n{_preview(tail, 200)}")
    return "\n".join(parts)

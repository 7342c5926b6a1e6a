"""The Python blocks of README.md and docs/: what tests/docs runs, and how it finds them.

A block is complete (it runs as printed: imports, a deterministic model where a
key would be needed, ``anyio.run`` for async code) unless the line before its
fence is the marker ``<!-- fragment -->``: then it is a piece of a larger program
(it needs a network, an API key, PostgreSQL, a server, or names from around it)
and is only shown.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
MARKER = "<!-- fragment -->"
LANGUAGES = frozenset({"python", "py"})
FENCE = re.compile(r"^([ \t]*)(```+|~~~+)[ \t]*([\w+-]*)[^\n]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One fenced code block."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    fragment: bool

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.language in LANGUAGES

    @property
    def is_async(self) -> bool:
        """Whether the block runs an event loop (and so runs once on each loop)."""
        return "anyio.run(" in self.code


def documents() -> list[Path]:
    """README.md and every page of the site."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_ext" not in p.parts)
    return [ROOT / "README.md", *pages]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, in order."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence, language = opening.groups()
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and lines[end].strip().strip(fence[0]) == ""
        ):
            end += 1
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        body = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        )
        found.append(
            Block(
                path=path,
                line=i + 1,
                language=language.lower(),
                code=textwrap.dedent(body) + "\n",
                fragment=previous == MARKER,
            )
        )
        i = end + 1
    return found


def stray_markers(path: Path) -> list[int]:
    """Lines holding the fragment marker that no Python block follows."""
    lines = path.read_text().splitlines()
    marked = {b.line for b in blocks(path) if b.fragment and b.is_python}
    stray = []
    for number, line in enumerate(lines, start=1):
        if line.strip() != MARKER:
            continue
        following = next(
            (n for n in range(number + 1, len(lines) + 1) if lines[n - 1].strip()), None
        )
        if following not in marked:
            stray.append(number)
    return stray


def python_blocks() -> list[Block]:
    """Every Python block of the README and the site."""
    return [b for path in documents() for b in blocks(path) if b.is_python]

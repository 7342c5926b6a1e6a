"""The CLI's live view of a run: the actor tree, or plain lines when not on a terminal.

On a terminal, :class:`LiveTree` draws every actor of the run as a row of a tree
(rich): its state, model calls, tokens and elapsed time, and what it is doing
now; a subagent that finished collapses to its summary row. Elsewhere (a pipe,
a log file) :func:`open_view` gives the plain one-line-per-event output.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from ..assembly.demo import print_event
from ..events import (
    Event,
    Interrupted,
    ModelCallFinished,
    ModelCallStarted,
    RunFinished,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    SubagentSpawned,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = ["LiveTree", "View", "open_view"]

REFRESH = 0.1
"""Seconds between redraws: events can come by the thousand."""

_STYLES = {
    "running": "yellow",
    "done": "green",
    "failed": "red",
    "cancelled": "magenta",
    "timed out": "magenta",
    "waiting": "cyan",
}


class View(Protocol):
    """Something that shows a run's events as they come."""

    def feed(self, event: Event) -> None:
        """Show one event."""
        ...


@dataclass(slots=True)
class _Row:
    path: str
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    state: str = "running"
    calls: int = 0
    tokens: int = 0
    doing: str = ""

    def render(self) -> Text:
        name = self.path.rsplit("/", 1)[-1]
        elapsed = (self.ended or time.monotonic()) - self.started
        text = Text(f"{name} ", style="bold")
        text.append(self.state, style=_STYLES.get(self.state, ""))
        text.append(f"  {self.calls} model call(s), {self.tokens} tokens, {elapsed:.1f}s")
        if self.doing and self.state == "running":
            text.append(f"  {self.doing}", style="dim")
        return text


class LiveTree:
    """The actor tree of one run, redrawn in place (see the module docstring).

    Args:
        console: Where to draw (a terminal).
    """

    def __init__(self, console: Console) -> None:
        self._console = console
        self._rows: dict[str, _Row] = {}
        self._live = Live(console=console, auto_refresh=False, transient=False)
        self._drawn = 0.0
        self.answer = ""

    def __enter__(self) -> LiveTree:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._draw(force=True)
        self._live.__exit__(None, None, None)
        if self.answer:
            self._console.print(self.answer)

    def _row(self, path: str) -> _Row:
        row = self._rows.get(path)
        if row is None:
            row = self._rows[path] = _Row(path)
        return row

    def feed(self, event: Event) -> None:
        """Update the tree with one event, and redraw it now and then."""
        row = self._row(event.path)
        match event:
            case ModelCallStarted():
                row.calls += 1
                row.doing = "thinking"
            case ModelCallFinished(message=message):
                if message.usage is not None:
                    row.tokens += message.usage.total_tokens
                row.doing = ""
                if "/" not in event.path and message.text.strip():
                    # The root's last words (a final answer may come with a tool
                    # call, such as a structured response's).
                    self.answer = message.text
            case ToolCallStarted(call=call):
                row.doing = f"{call.name}(...)"
            case ToolCallFinished():
                row.doing = ""
            case SubagentSpawned(child=child):
                self._row(child)
            case SubagentFinished(child=child):
                self._end(child, "done")
            case SubagentFailed(child=child):
                self._end(child, "failed")
            case SubagentCancelled(child=child, timed_out=timed_out):
                self._end(child, "timed out" if timed_out else "cancelled")
            case SubagentInterrupted(child=child):
                self._end(child, "waiting")
            case Interrupted():
                row.state = "waiting"
            case RunFinished(outcome=outcome):
                states = {"completed": "done", "interrupted": "waiting", "timed_out": "timed out"}
                self._end(event.path, states.get(outcome, outcome))
        self._draw(force=isinstance(event, RunFinished))

    def _end(self, path: str, state: str) -> None:
        row = self._row(path)
        row.state, row.ended = state, time.monotonic()

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn < REFRESH:
            return
        self._drawn = now
        self._live.update(self.render(), refresh=True)

    def render(self) -> Tree:
        """The tree as it stands: finished subagents collapse to their own row."""
        roots = [p for p in self._rows if "/" not in p] or ["main"]
        tree = Tree(self._row(roots[0]).render())
        nodes = {roots[0]: tree}
        for path in sorted(self._rows, key=lambda p: p.count("/")):
            parent, _, _ = path.rpartition("/")
            node = nodes.get(parent)
            if node is None or path in nodes:
                continue
            row = self._rows[path]
            child = node.add(row.render())
            if row.state == "running":
                nodes[path] = child  # only a running actor shows its own children
        return tree


class _Lines:
    """One line per event, for pipes and log files."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def feed(self, event: Event) -> None:
        print_event(event, self._out)


@contextmanager
def open_view(out: TextIO | None = None, *, live: bool | None = None) -> Iterator[View]:
    """The view for ``out``: the live tree on a terminal, plain lines elsewhere.

    Args:
        out: Where to write (default ``sys.stdout``).
        live: Force the choice (default: whether ``out`` is a terminal).
    """
    stream = out if out is not None else sys.stdout
    if live is None:
        live = stream.isatty()
    if not live:
        yield _Lines(stream)
        return
    with LiveTree(Console(file=stream)) as tree:
        yield tree

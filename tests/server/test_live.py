"""The CLI's live view: the actor tree on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from deepactors.assembly.demo import run_demo
from deepactors.cli._live import LiveTree, open_view

pytestmark = pytest.mark.anyio


async def test_the_tree_shows_each_subagent_collapsed_when_done() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    with LiveTree(console) as tree:
        result = await run_demo(on_event=tree.feed)
    drawn = console.export_text() if console.record else out.getvalue()
    final = tree.render()
    labels = [str(child.label) for child in final.children]
    assert len(labels) == 4  # three researchers and the archivist
    researchers = [label for label in labels if "researcher" in label]
    assert len(researchers) == 3
    assert all("done" in label and "3 model call(s)" in label for label in researchers)
    assert all("done" in label for label in labels)
    assert "done" in str(final.label)
    assert "researcher" in drawn
    last_ai = next(m for m in reversed(result["messages"]) if m.type == "ai")
    assert tree.answer == last_ai.text


async def test_off_a_terminal_the_view_prints_lines() -> None:
    out = io.StringIO()
    with open_view(out) as view:
        await run_demo(on_event=view.feed)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[main] * run started"
    assert any(line.startswith("[main/task-") for line in lines)
    assert lines[-1].endswith("run completed")

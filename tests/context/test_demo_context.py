"""The demo shows memory, a skill and a summarized long run in its event output."""

from __future__ import annotations

import io

import pytest

from deepactors.assembly.demo import MEMORY_PATH, SKILL_PATH, print_event, run_demo
from deepactors.events import ContextSummarized, Event, ModelCallFinished, ToolCallStarted

pytestmark = pytest.mark.anyio


async def test_the_demo_uses_memory_and_a_skill_and_summarizes_a_long_run() -> None:
    seen: list[Event] = []
    result = await run_demo(on_event=seen.append)
    main_texts = [
        e.message.text for e in seen if isinstance(e, ModelCallFinished) and e.path == "main"
    ]
    assert main_texts[0].startswith("My memory says: The user likes reports")
    reads = [e.call.args.get("file_path") for e in seen if isinstance(e, ToolCallStarted)]
    assert SKILL_PATH in reads
    edits = [
        e.call.args["file_path"]
        for e in seen
        if isinstance(e, ToolCallStarted) and e.call.name == "edit_file"
    ]
    assert edits == [MEMORY_PATH]
    # The final call saw the memory the agent had just edited.
    last_ai = next(m for m in reversed(result["messages"]) if m.type == "ai")
    assert "Memory updated: Asked about: actors" in last_ai.text
    # The report follows the skill: a one-line answer first, sources last.
    report = result["files"]["/report.md"].content
    assert report.splitlines()[2].startswith("In one line:")
    assert report.rstrip().splitlines()[-1].startswith("Sources: /notes/")
    summarized = [e for e in seen if isinstance(e, ContextSummarized)]
    assert summarized
    assert {e.path for e in summarized} == {"main/task-4:archivist"}
    assert all(e.file_path and e.file_path.startswith("/conversation_history/") for e in summarized)
    out = io.StringIO()
    print_event(summarized[0], out)
    assert out.getvalue().startswith("[main/task-4:archivist] ~ context summarized:")

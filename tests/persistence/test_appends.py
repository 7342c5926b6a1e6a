"""A state file grown by appends costs its added text in a checkpoint, not a copy per append.

A conversation transcript (summarization's history file) on the default
``StateBackend`` is appended to many times; each stored record holds only the
added text, and replaying the records rebuilds the file exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepactors import AssistantMessage, ScriptedModel, ToolCall, ToolRuntime, create_deep_agent
from deepactors.errors import CheckpointCorrupt
from deepactors.filediff import FileRecord
from deepactors.persistence import Checkpointer, CheckpointWrite, SqliteCheckpointer

pytestmark = pytest.mark.anyio

CHUNK = "x" * 1_000 + "\n"


async def log(line: str, runtime: ToolRuntime) -> str:
    """Add a line to /log.md."""
    assert runtime.backend is not None
    await runtime.backend.append("/log.md", line)
    return "logged"


def appending_agent(checkpointer: Checkpointer, appends: int) -> Any:
    turns: list[AssistantMessage | str] = [
        AssistantMessage(tool_calls=[ToolCall(name="log", args={"line": f"{i}:{CHUNK}"})])
        for i in range(appends)
    ]
    return create_deep_agent(
        ScriptedModel([*turns, "done"]), tools=[log], checkpointer=checkpointer
    )


def stored_bytes(records: Any) -> int:
    return sum(len(json.dumps(r.data)) for r in records)


async def test_each_append_stores_only_the_added_text(tmp_path: Path) -> None:
    saver = SqliteCheckpointer(tmp_path / "t.db")
    agent = appending_agent(saver, 60)
    result = await agent.ainvoke("go", thread_id="t")
    content = "".join(f"{i}:{CHUNK}" for i in range(60))
    assert result["files"]["/log.md"].content == content
    assert result["files"]["/log.md"].version == 60
    # 60 appends of ~1 KB: a copy per append would store ~1.8 MB.
    assert stored_bytes(await saver.read("t")) < 3 * len(content)

    # A new agent (another process, say) replays the records into the same file.
    again = create_deep_agent(ScriptedModel(["more"]), tools=[log], checkpointer=saver)
    state = await again.aget_state("t")
    record = state.values["files"]["/log.md"]
    assert record == result["files"]["/log.md"]
    await saver.aclose()


async def test_the_record_equals_one_written_whole() -> None:
    base = FileRecord(content="a\n", created_at=1.0, modified_at=1.0)
    grown = base.appended("b\n", modified_at=2.0)
    written = FileRecord(content="a\nb\n", version=2, created_at=1.0, modified_at=2.0)
    assert grown == written
    assert hash(grown) == hash(written)
    assert grown.appended_at == 2
    assert written.appended_at is None
    assert grown.model_dump() == written.model_dump()


async def test_an_append_that_does_not_fit_the_file_is_a_damaged_checkpoint(
    tmp_path: Path,
) -> None:
    saver = SqliteCheckpointer(tmp_path / "t.db")
    await appending_agent(saver, 2).ainvoke("go", thread_id="t")
    records = await saver.read("t")
    # Drop the record that created /log.md: the first append then lands on nothing.
    creating = next(
        r for r in records if r.kind == "update" and "/log.md" in r.data.get("files", {})
    )
    kept = [r for r in records if r.seq != creating.seq]
    other = SqliteCheckpointer(tmp_path / "other.db")
    await other.put(
        "t", [CheckpointWrite(path=r.path, step=r.step, kind=r.kind, data=r.data) for r in kept]
    )
    agent = appending_agent(other, 0)
    with pytest.raises(CheckpointCorrupt) as info:
        await agent.aget_state("t")
    assert "thread 't'" in str(info.value)
    assert "appended to /log.md at version 1" in str(info.value)
    await saver.aclose()
    await other.aclose()


async def test_a_child_that_appended_twice_merges_into_a_checkpoint_that_replays(
    tmp_path: Path,
) -> None:
    # The child's last version grew from its own middle version, which the parent
    # never had: the parent's checkpoint must store that record whole.
    saver = SqliteCheckpointer(tmp_path / "t.db")
    child = ScriptedModel(
        [
            AssistantMessage(tool_calls=[ToolCall(name="log", args={"line": "two\n"})]),
            AssistantMessage(tool_calls=[ToolCall(name="log", args={"line": "three\n"})]),
            "logged twice",
        ]
    )
    parent = ScriptedModel(
        [
            AssistantMessage(tool_calls=[ToolCall(name="log", args={"line": "one\n"})]),
            AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": "log", "subagent_type": "logger"})
                ]
            ),
            "done",
        ]
    )
    logger = {"name": "logger", "description": "logs", "system_prompt": "log", "model": child}
    agent = create_deep_agent(parent, tools=[log], subagents=[logger], checkpointer=saver)
    result = await agent.ainvoke("go", thread_id="t")
    assert result["files"]["/log.md"].content == "one\ntwo\nthree\n"

    again = create_deep_agent(ScriptedModel(["more"]), tools=[log], checkpointer=saver)
    state = await again.aget_state("t")
    assert state.values["files"]["/log.md"] == result["files"]["/log.md"]
    await saver.aclose()

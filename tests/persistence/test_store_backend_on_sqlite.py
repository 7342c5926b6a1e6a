"""StoreBackend on a SqliteStore: an agent's long-term files survive the process."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import CompositeBackend, StateBackend, StoreBackend
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteStore

pytestmark = pytest.mark.anyio


def writer(path: str, text: str) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="write_file", args={"file_path": path, "content": text}),
                    ToolCall(
                        name="write_file", args={"file_path": "/scratch.md", "content": "tmp"}
                    ),
                ]
            )
        return AssistantMessage(content="saved")

    return FunctionModel(answer)


async def test_memories_routed_to_a_sqlite_store_outlive_the_run(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with SqliteStore(db) as store:
        backend = CompositeBackend(
            StateBackend(), routes={"/memories/": StoreBackend(store, namespace=("user-1",))}
        )
        agent = create_deep_agent(writer("/memories/prefs.md", "likes tea\r\n"), backend=backend)
        result = await agent.ainvoke("remember")
    assert "/scratch.md" in result["files"]  # state files stay with the run
    assert "/memories/prefs.md" not in result["files"]
    async with SqliteStore(db) as reopened:
        again = StoreBackend(reopened, namespace=("user-1",))
        window = await again.read("/prefs.md")
        assert window.lines == ("likes tea",)
        assert (await again.stat("/prefs.md")).size == len("likes tea\r\n")
        assert [f.path for f in await again.glob("**/*.md")] == ["/prefs.md"]
        others = StoreBackend(reopened, namespace=("user-2",))
        assert await others.ls("/") == []

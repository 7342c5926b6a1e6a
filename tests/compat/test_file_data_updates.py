"""A tool's ``Command(update={"files": {path: create_file_data(...)}})`` (issue 42 item 3).

deepagents' tools write files as ``FileData`` dicts; the same shape is accepted
as a run's input, and now from a tool too.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command as LGCommand

from deepactors import Command
from deepactors.langchain import create_deep_agent, create_file_data
from deepactors.messages import AssistantMessage, ToolCall
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def calling(name: str, args: dict[str, Any]) -> FunctionModel:
    def answer(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return AssistantMessage(
                content="", tool_calls=[ToolCall(id="c1", name=name, args=args)]
            )
        return "done"

    return FunctionModel(answer)


@tool
def save_note(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> LGCommand:
    """Save a note."""
    return LGCommand(
        update={
            "files": {"/notes.md": create_file_data(text)},
            "messages": [ToolMessage(content="saved", tool_call_id=tool_call_id)],
        }
    )


async def test_a_langchain_tool_writes_a_file_as_file_data() -> None:
    agent = create_deep_agent(model=calling("save_note", {"text": "hello"}), tools=[save_note])
    result = await agent.ainvoke("save it")
    assert result["files"]["/notes.md"]["content"] == "hello"
    assert result["messages"][2].content == "saved"


async def test_file_data_over_an_existing_file_is_its_next_version() -> None:
    def save(text: str) -> Command:
        """Save a note."""
        encoded = base64.b64encode(text.encode()).decode()
        return Command(
            update={"files": {"/notes.md": create_file_data(encoded, encoding="base64")}}
        )

    agent = create_deep_agent(model=calling("save", {"text": "new text"}), tools=[save])
    result = await agent.ainvoke({"messages": [("user", "go")], "files": {"/notes.md": "old"}})
    record = result["files"]["/notes.md"]
    assert record["content"] == "new text"
    assert record.version == 2


async def test_file_data_that_is_not_text_is_an_error_the_model_reads() -> None:
    def save() -> Command:
        """Save a note."""
        return Command(update={"files": {"/notes.md": {"content": 42, "encoding": "utf-8"}}})

    agent = create_deep_agent(model=calling("save", {}), tools=[save])
    result = await agent.ainvoke("go")
    assert "/notes.md" not in result.get("files", {})
    assert result["messages"][2].status == "error"
    assert "'content' must be text" in result["messages"][2].content

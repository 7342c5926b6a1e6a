"""MemoryMiddleware: AGENTS.md in every call, reloaded on change, missing skipped, bad named."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.backends import FilesystemBackend
from deepactors.errors import BinaryFile, IsADirectory
from deepactors.messages import SystemMessage, ToolMessage
from deepactors.middleware import MemoryMiddleware
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def memory_of(request: ModelRequest) -> str:
    first = request.messages[0]
    assert isinstance(first, SystemMessage), "the memory message comes first"
    return first.text


class Steps:
    """A model that plays a list of answers and keeps every request."""

    def __init__(self, *answers: AssistantMessage | str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> AssistantMessage | str:
        self.requests.append(request)
        return self.answers[len(self.requests) - 1]


def call(name: str, **args: object) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=name, args=args)])


async def test_memory_is_in_every_call_without_html_comments() -> None:
    model = Steps(call("ls", path="/"), "done")
    agent = create_deep_agent(FunctionModel(model), memory=["/AGENTS.md"])
    files = {"/AGENTS.md": "# Preferences\n<!-- maintainer note: hidden -->\nThe user likes tea.\n"}
    await agent.ainvoke({"messages": "hi", "files": files})
    for request in model.requests:
        text = memory_of(request)
        assert '<file path="/AGENTS.md">' in text
        assert "The user likes tea." in text
        assert "hidden" not in text
        assert "<memory_guidelines>" in text
    # The memory is never written into the conversation itself.
    assert model.requests[1].messages[1].text == "hi"


async def test_an_edit_by_the_agent_is_seen_by_the_very_next_call() -> None:
    model = Steps(
        call("read_file", file_path="/AGENTS.md"),
        call("edit_file", file_path="/AGENTS.md", old_string="tea", new_string="coffee"),
        "noted",
    )
    agent = create_deep_agent(FunctionModel(model), memory=["/AGENTS.md"])
    result = await agent.ainvoke({"messages": "I prefer coffee", "files": {"/AGENTS.md": "tea"}})
    assert result["files"]["/AGENTS.md"].content == "coffee"
    assert "tea" in memory_of(model.requests[1])
    assert "coffee" in memory_of(model.requests[2])


async def test_an_edit_merged_back_from_a_subagent_is_seen_next() -> None:
    parent = Steps(call("task", description="learn", subagent_type="general-purpose"), "ok")
    child = Steps(
        call("write_file", file_path="/AGENTS.md", content="Always answer in French."),
        "saved",
    )
    agent = create_deep_agent(
        FunctionModel(parent),
        memory=["/AGENTS.md"],
        subagents=[
            {
                "name": "general-purpose",
                "description": "does things",
                "system_prompt": "do it",
                "model": FunctionModel(child),
            }
        ],
    )
    await agent.ainvoke("learn something")
    assert "no memory yet" in memory_of(parent.requests[0])
    assert "Always answer in French." in memory_of(parent.requests[1])


async def test_changes_on_disk_are_seen_within_a_run_and_in_the_next(tmp_path: Path) -> None:
    memory = anyio.Path(tmp_path / "AGENTS.md")
    await memory.write_text("version one")

    async def note_elsewhere() -> str:
        """Another process changes the memory file."""
        await memory.write_text("version two, written outside the agent")
        return "changed"

    model = Steps(call("note_elsewhere"), "first run done", "second run done")
    agent = create_deep_agent(
        FunctionModel(model),
        tools=[note_elsewhere],
        memory=["/AGENTS.md"],
        backend=FilesystemBackend(tmp_path),
    )
    await agent.ainvoke("go")
    assert "version one" in memory_of(model.requests[0])
    assert "version two" in memory_of(model.requests[1])
    await memory.write_text("version three")
    await agent.ainvoke("again")
    assert "version three" in memory_of(model.requests[2])


async def test_missing_files_are_skipped_and_deletions_noticed() -> None:
    model = Steps(call("delete", file_path="/team/AGENTS.md"), "done")
    agent = create_deep_agent(FunctionModel(model), memory=["/AGENTS.md", "/team/AGENTS.md"])
    await agent.ainvoke({"messages": "hi", "files": {"/team/AGENTS.md": "team rules"}})
    first, second = (memory_of(r) for r in model.requests)
    assert '<file path="/team/AGENTS.md">' in first
    assert '<file path="/AGENTS.md">' not in first
    assert "team rules" not in second
    assert "no memory yet: create /AGENTS.md, /team/AGENTS.md" in second


async def test_an_unreadable_memory_file_is_an_error_naming_it(tmp_path: Path) -> None:
    await anyio.Path(tmp_path / "AGENTS.md").write_bytes(b"\x00\x01binary")
    agent = create_deep_agent(
        FunctionModel(lambda r: "never"),
        memory=["/AGENTS.md"],
        backend=FilesystemBackend(tmp_path),
    )
    with pytest.raises(BinaryFile, match=r"memory file /AGENTS\.md"):
        await agent.ainvoke("hi")

    folder = create_deep_agent(FunctionModel(lambda r: "never"), memory=["/notes"])
    with pytest.raises(IsADirectory, match="/notes"):
        await folder.ainvoke({"messages": "hi", "files": {"/notes/a.md": "x"}})


async def test_a_memory_file_is_read_only_when_it_changed(tmp_path: Path) -> None:
    # A read marks the memory changed and builds a new message; an unchanged
    # version token reuses the one message object of the first call.
    model = Steps(call("ls", path="/"), call("ls", path="/"), "done")
    agent = create_deep_agent(
        FunctionModel(model), memory=["/AGENTS.md"], backend=FilesystemBackend(tmp_path)
    )
    await anyio.Path(tmp_path / "AGENTS.md").write_text("stable")
    result = await agent.ainvoke("go")
    assert result["messages"][-1].text == "done"
    texts = [memory_of(r) for r in model.requests]
    assert all("stable" in t for t in texts)
    assert all(t is texts[0] for t in texts)  # one message object, built once


def test_bad_memory_sources_are_refused() -> None:
    from deepactors.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        MemoryMiddleware([])
    with pytest.raises(ConfigurationError):
        MemoryMiddleware("/AGENTS.md")
    with pytest.raises(ConfigurationError, match="invalid memory path"):
        MemoryMiddleware(["../AGENTS.md"])


async def test_results_of_memory_tools_still_reach_the_model() -> None:
    model = Steps(call("read_file", file_path="/AGENTS.md"), "done")
    agent = create_deep_agent(FunctionModel(model), memory=["/AGENTS.md"])
    await agent.ainvoke({"messages": "hi", "files": {"/AGENTS.md": "remember this"}})
    last = model.requests[1].messages[-1]
    assert isinstance(last, ToolMessage)
    assert "remember this" in last.text

"""Regression tests for the defects a new user hit: thread state across runs and resumes."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from deepactors import (
    AssistantMessage,
    Command,
    InputError,
    MemoryCheckpointer,
    ToolCall,
    ToolMessage,
    create_deep_agent,
    open_runtime,
)
from deepactors.errors import ConfigurationError
from deepactors.models import FunctionModel, ModelRequest, ScriptedModel

pytestmark = pytest.mark.anyio


def write_read_edit() -> list[AssistantMessage]:
    return [
        AssistantMessage(
            tool_calls=[ToolCall(name="write_file", args={"file_path": "/a.md", "content": "v1"})]
        ),
        AssistantMessage(tool_calls=[ToolCall(name="read_file", args={"file_path": "/a.md"})]),
        AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="edit_file",
                    args={"file_path": "/a.md", "old_string": "v1", "new_string": "v2"},
                )
            ]
        ),
        AssistantMessage(content="edited"),
    ]


async def test_an_approved_edit_after_a_resume_is_not_refused_for_want_of_a_read() -> None:
    agent = create_deep_agent(
        ScriptedModel(write_read_edit()),
        checkpointer=MemoryCheckpointer(),
        interrupt_on={"edit_file": True},
    )
    first = await agent.ainvoke("go", thread_id="t")
    assert first["__interrupt__"][0]["tool"] == "edit_file"
    done = await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="t")
    edit = next(m for m in done["messages"] if isinstance(m, ToolMessage) and m.name == "edit_file")
    assert edit.status == "success", edit.text
    assert done["files"]["/a.md"].content == "v2"


async def test_a_read_in_one_run_lets_the_next_run_of_the_thread_edit() -> None:
    script = write_read_edit()
    agent = create_deep_agent(
        ScriptedModel([*script[:2], AssistantMessage(content="read it"), *script[2:]]),
        checkpointer=MemoryCheckpointer(),
    )
    await agent.ainvoke("write and read", thread_id="t")
    done = await agent.ainvoke("now edit", thread_id="t")
    assert done["files"]["/a.md"].content == "v2"


async def test_a_read_is_stale_when_the_file_changed_since() -> None:
    script = write_read_edit()
    agent = create_deep_agent(
        ScriptedModel([*script[:2], AssistantMessage(content="read it"), *script[2:]]),
        checkpointer=MemoryCheckpointer(),
    )
    await agent.ainvoke("write and read", thread_id="t")
    # The user replaces the file between the runs: the read no longer counts.
    done = await agent.ainvoke(
        {"messages": "now edit", "files": {"/a.md": "v1 by user"}}, thread_id="t"
    )
    edit = next(m for m in done["messages"] if isinstance(m, ToolMessage) and m.name == "edit_file")
    assert edit.status == "error"
    assert "read" in edit.text
    assert done["files"]["/a.md"].content == "v1 by user"


async def test_continuing_a_finished_thread_calls_nothing_and_returns_its_state() -> None:
    calls = 0

    def answer(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        return "the answer"

    agent = create_deep_agent(FunctionModel(answer), checkpointer=MemoryCheckpointer())
    first = await agent.ainvoke("question", thread_id="t")
    again = await agent.ainvoke(None, thread_id="t")
    assert calls == 1
    assert [m.text for m in again["messages"]] == [m.text for m in first["messages"]]
    async with open_runtime() as rt:  # a live thread actor too
        await rt.thread(agent, "u").ainvoke("more")
        await rt.thread(agent, "u").ainvoke(None)
    assert calls == 2


async def test_continuing_a_thread_with_nothing_saved_is_an_error() -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "x"), checkpointer=MemoryCheckpointer())
    with pytest.raises(InputError, match="no saved state"):
        await agent.ainvoke(None, thread_id="never")
    with pytest.raises(InputError, match="empty"):
        await agent.ainvoke({"messages": []}, thread_id="never")
    with pytest.raises(InputError, match="no message"):
        await agent.ainvoke({"files": {"/a.md": "x"}}, thread_id="never")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"thread_id": 123}, "thread_id must be a non-empty string"),
        ({"timeout": "5"}, "timeout must be a number"),
        ({"config": {"configurable": {"thread_id": "a"}}, "thread_id": "b"}, "two thread ids"),
        ({"config": {"recursion_limt": 5}}, "unknown config key"),
    ],
)
async def test_bad_run_options_are_clear_input_errors(kwargs: dict[str, Any], match: str) -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "x"))
    with pytest.raises(InputError, match=match):
        await agent.ainvoke("hi", **kwargs)


async def test_a_resume_that_is_not_decisions_is_a_clear_error() -> None:
    agent = create_deep_agent(
        ScriptedModel(write_read_edit()),
        checkpointer=MemoryCheckpointer(),
        interrupt_on={"edit_file": True},
    )
    await agent.ainvoke("go", thread_id="t")
    with pytest.raises(InputError, match="list of decisions"):
        await agent.ainvoke(Command(resume=42), thread_id="t")


async def test_a_thread_without_a_checkpointer_warns_where_nothing_keeps_it() -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "x"))
    with pytest.warns(UserWarning, match="no checkpointer"):
        await agent.ainvoke("hi", thread_id="t")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with open_runtime() as rt:  # the thread actor keeps it: no warning
            await agent.ainvoke("hi", thread_id="t", runtime=rt)
            second = await agent.ainvoke("again", thread_id="t", runtime=rt)
        assert len(second["messages"]) == 4
        await agent.ainvoke("no thread, no warning")


def test_interrupt_on_names_must_be_tools_the_agent_has() -> None:
    with pytest.raises(ConfigurationError, match=r"edit_fiel.*edit_file"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            checkpointer=MemoryCheckpointer(),
            interrupt_on={"edit_fiel": True},
        )
    # README's old example: the state backend has no `execute`.
    with pytest.raises(ConfigurationError, match="execute"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            checkpointer=MemoryCheckpointer(),
            interrupt_on={"execute": True},
        )
    with pytest.raises(ConfigurationError, match="unknown key"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            checkpointer=MemoryCheckpointer(),
            interrupt_on={"edit_file": {"allowed": ["approve"]}},
        )


def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


async def test_subagent_interrupt_on_override_disables_parent_interrupt() -> None:
    def parent(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": "hi", "subagent_type": "free"})
                ]
            )
        return AssistantMessage(content="parent done")

    def child(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="shout", args={"text": "hey"})])
        return AssistantMessage(content="child done")

    agent = create_deep_agent(
        FunctionModel(parent),
        tools=[shout],
        checkpointer=MemoryCheckpointer(),
        interrupt_on={"shout": True},
        subagents=[
            {
                "name": "free",
                "description": "no approvals",
                "prompt": "older deepagents' key for system_prompt",
                "model": FunctionModel(child),
                "interrupt_on": {},
            }
        ],
    )
    result = await agent.ainvoke("go", thread_id="t")
    assert "__interrupt__" not in result
    assert result["messages"][-1].text == "parent done"


async def test_a_prebuilt_agent_is_a_runnable_subagent() -> None:
    inner = create_deep_agent(FunctionModel(lambda r: "from the prebuilt agent"), name="inner")

    def parent(request: ModelRequest) -> AssistantMessage:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": "x", "subagent_type": "prebuilt"})
                ]
            )
        return AssistantMessage(content=results[0].text)

    agent = create_deep_agent(
        FunctionModel(parent),
        subagents=[{"name": "prebuilt", "description": "d", "runnable": inner}],
    )
    result = await agent.ainvoke("go")
    assert result["messages"][-1].text == "from the prebuilt agent"


def test_subagent_dicts_are_checked_by_name() -> None:
    with pytest.raises(ConfigurationError, match=r"subagent 'x': timeout"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            subagents=[{"name": "x", "description": "d", "system_prompt": "p", "timeout": -1}],
        )
    with pytest.raises(ConfigurationError, match="known keys"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            subagents=[{"name": "x", "description": "d", "system_prompt": "p", "tool": []}],
        )


async def test_file_data_dicts_are_read_and_shown_as_deepagents_does() -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "ok"))
    result = await agent.ainvoke(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "files": {
                "/notes.md": {
                    "content": ["line 1", "line 2"],
                    "created_at": "2025-06-01T10:00:00+00:00",
                    "modified_at": "2025-06-01T10:00:00+00:00",
                }
            },
        }
    )
    assert result["files"]["/notes.md"]["content"] == "line 1\nline 2"
    assert result["files"]["/notes.md"]["created_at"] == "2025-06-01T10:00:00+00:00"
    with pytest.raises(InputError, match=r"\.\."):
        await agent.ainvoke({"messages": "x", "files": {"/a/../b.md": "x"}})


async def test_a_tool_result_without_its_call_is_refused_as_input() -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "ok"), checkpointer=MemoryCheckpointer())
    orphan = {"role": "tool", "tool_call_id": "nope", "name": "x", "content": "r"}
    with pytest.raises(InputError, match="answers no tool call"):
        await agent.ainvoke(
            {"messages": [{"role": "user", "content": "hi"}, orphan]}, thread_id="t"
        )
    # With its call in the input, the same result is fine.
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "nope", "name": "x", "args": {}}],
    }
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "hi"}, call, orphan]}, thread_id="u"
    )
    assert result["messages"][-1].text == "ok"

"""An agent's MCP tools: listed with the server's schemas, named, filtered, called, read."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, Command, ToolCall, ToolMessage, create_deep_agent
from deepactors.errors import ConfigurationError
from deepactors.events import ToolCallFinished
from deepactors.mcp import MCPServer
from deepactors.mcp._config import sdk_problem
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from tests.mcp.servers import SDK_HTTP_ON_TRIO, app_server

pytestmark = [pytest.mark.anyio, SDK_HTTP_ON_TRIO]


def calls_then_done(*calls: ToolCall, seen: list[ModelRequest] | None = None) -> FunctionModel:
    """A model that makes ``calls`` on its first turn and then answers "done"."""

    def answer(request: ModelRequest) -> AssistantMessage:
        if seen is not None:
            seen.append(request)
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=list(calls))
        return AssistantMessage(content="done")

    return FunctionModel(answer)


def results(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.name: m for m in state["messages"] if isinstance(m, ToolMessage)}


def tool_named(request: ModelRequest, name: str) -> Any:
    return next(t for t in request.tools if t.name == name)


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, app_log: Path) -> MCPServer:
    """Our test server, over stdio and over streamable HTTP."""
    if request.param == "stdio":
        return app_server(app_log)
    url, _ = request.getfixturevalue("http_app")
    return MCPServer.http(url, name="app")


@pytest.mark.usefixtures("blocking_detector")
async def test_tools_reach_the_model_with_the_servers_schemas_and_answer(
    server: MCPServer,
) -> None:
    seen: list[ModelRequest] = []
    model = calls_then_done(
        ToolCall(name="echo", args={"text": "hi"}),
        ToolCall(name="add", args={"a": 2, "b": 3}),
        ToolCall(name="fail", args={"reason": "no way"}),
        seen=seen,
    )
    agent = create_deep_agent(model, mcp_servers={"app": server})
    with anyio.fail_after(30):
        state = await agent.ainvoke("go")
    add = tool_named(seen[0], "add")
    assert add.parameters["properties"]["a"] == {"title": "A", "type": "integer"}
    assert add.parameters["required"] == ["a", "b"]
    assert tool_named(seen[0], "echo").description == "Say the text back."
    got = results(state)
    assert got["echo"].content == "echo: hi"
    assert got["echo"].status == "success"
    assert json.loads(got["add"].text) == {"sum": 5}
    assert got["fail"].status == "error"
    assert "no way" in got["fail"].text


async def test_prefix_include_and_exclude_choose_the_tools_the_model_sees(
    app_log: Path,
) -> None:
    seen: list[ModelRequest] = []
    model = calls_then_done(ToolCall(name="t_echo", args={"text": "x"}), seen=seen)
    agent = create_deep_agent(
        model,
        tools=[app_server(app_log, prefix="t_", include={"echo", "add", "pid"}, exclude={"pid"})],
    )
    with anyio.fail_after(30):
        state = await agent.ainvoke("go")
    names = {t.name for t in seen[0].tools}
    assert {"t_echo", "t_add"} <= names
    assert not names & {"echo", "t_pid", "t_hang", "t_crash", "pid"}
    assert results(state)["t_echo"].content == "echo: x"


async def test_a_subagent_gets_its_own_servers_from_its_spec(app_log: Path) -> None:
    parent_seen: list[ModelRequest] = []
    child_seen: list[ModelRequest] = []
    child = calls_then_done(ToolCall(name="echo", args={"text": "from child"}), seen=child_seen)
    parent = calls_then_done(
        ToolCall(name="task", args={"description": "echo", "subagent_type": "echoer"}),
        seen=parent_seen,
    )
    spec = {
        "name": "echoer",
        "description": "echoes",
        "system_prompt": "echo",
        "model": child,
        "mcp_servers": {"app": app_server(app_log)},
    }
    agent = create_deep_agent(parent, subagents=[spec])
    with anyio.fail_after(30):
        state = await agent.ainvoke("go")
    assert "echo" not in {t.name for t in parent_seen[0].tools}
    assert "echo" in {t.name for t in child_seen[0].tools}
    assert "done" in results(state)["task"].text
    child_results = [m for r in child_seen for m in r.messages if isinstance(m, ToolMessage)]
    assert [m.content for m in child_results] == ["echo: from child"]


async def test_a_server_tool_named_like_another_tool_is_refused_with_the_way_out(
    app_log: Path,
) -> None:
    def echo(text: str) -> str:
        """Our own echo."""
        return text

    agent = create_deep_agent(calls_then_done(), tools=[echo, app_server(app_log)])
    with anyio.fail_after(30), pytest.raises(ConfigurationError, match="prefix="):
        await agent.ainvoke("go")
    agent = create_deep_agent(calls_then_done(), tools=[echo, app_server(app_log, prefix="app_")])
    with anyio.fail_after(30):
        await agent.ainvoke("go")


def test_configuration_is_checked_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigurationError, match="needs a 'command'"):
        create_deep_agent(FunctionModel(lambda r: "x"), mcp_servers={"x": {"args": ["a"]}})
    with pytest.raises(ConfigurationError, match="unknown key"):
        create_deep_agent(
            FunctionModel(lambda r: "x"), mcp_servers={"x": {"command": "a", "argz": []}}
        )
    with pytest.raises(ConfigurationError, match="not a tool"):
        create_deep_agent(FunctionModel(lambda r: "x"), tools=[42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="http"):
        MCPServer.http("ftp://example.com")
    servers = {"mcpServers": {"t": {"command": "uvx", "args": ["mcp-server-time"]}}}
    agent = create_deep_agent(FunctionModel(lambda r: "x"), mcp_servers=servers)
    assert agent.spec is not None


async def test_a_large_result_is_evicted_to_a_file_like_any_tool_s(app_log: Path) -> None:
    big = "x" * 100_000
    agent = create_deep_agent(
        calls_then_done(ToolCall(name="echo", args={"text": big})),
        mcp_servers={"app": app_server(app_log)},
    )
    with anyio.fail_after(30):
        state = await agent.ainvoke("go")
    (path,) = [p for p in state["files"] if p.startswith("/large_tool_results/")]
    assert "/large_tool_results/" in results(state)["echo"].text
    assert big in state["files"][path].content.replace("\n", "")


async def test_a_lazy_server_lists_names_and_loads_schemas_when_asked(app_log: Path) -> None:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> AssistantMessage:
        seen.append(request)
        turn = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if turn == 0:
            return AssistantMessage(
                tool_calls=[ToolCall(name="load_mcp_tools", args={"names": ["add", "nope"]})]
            )
        if turn == 1:
            return AssistantMessage(tool_calls=[ToolCall(name="add", args={"a": 1, "b": 2})])
        return AssistantMessage(content="done")

    agent = create_deep_agent(
        FunctionModel(answer), mcp_servers={"app": app_server(app_log, lazy=True)}
    )
    with anyio.fail_after(30):
        state = await agent.ainvoke("go")
    first, second = {t.name for t in seen[0].tools}, {t.name for t in seen[1].tools}
    assert "load_mcp_tools" in first
    assert not first & {"add", "echo"}  # no schema yet: names only, in the prompt
    assert "- add: Add two integers" in (seen[0].system_prompt or "")
    assert "add" in second
    assert "echo" not in second
    got = results(state)
    assert got["load_mcp_tools"].text == "Loaded: add. Not MCP tools to load: nope."
    assert json.loads(got["add"].text) == {"sum": 3}


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    assert sdk_problem() == "MCP servers need the official mcp SDK: pip install 'deepactors[mcp]'"


async def test_a_streamed_run_calls_mcp_tools_too(app_log: Path) -> None:
    agent = create_deep_agent(
        calls_then_done(ToolCall(name="echo", args={"text": "streamed"})),
        mcp_servers={"app": app_server(app_log)},
    )
    finished = []
    with anyio.fail_after(30):
        async with agent.astream("go") as stream:
            async for event in stream:
                if isinstance(event, ToolCallFinished):
                    finished.append(event.result.text)
    assert finished == ["echo: streamed"]


async def test_interrupt_on_guards_an_mcp_tool_named_by_include(app_log: Path) -> None:
    agent = create_deep_agent(
        calls_then_done(ToolCall(name="app_echo", args={"text": "approved"})),
        mcp_servers={"app": app_server(app_log, prefix="app_", include={"echo"})},
        interrupt_on={"app_echo": True},
        checkpointer=MemoryCheckpointer(),
    )
    with anyio.fail_after(30):
        paused = await agent.ainvoke("go", thread_id="h")
        assert "__interrupt__" in paused
        assert "app_echo" not in results(paused)  # not run before the human says so
        done = await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="h")
    assert results(done)["app_echo"].content == "echo: approved"
    with pytest.raises(ConfigurationError, match="interrupt_on names"):
        create_deep_agent(
            calls_then_done(),
            mcp_servers={"app": app_server(app_log)},  # no include=: names unknown yet
            interrupt_on={"echo": True},
            checkpointer=MemoryCheckpointer(),
        )

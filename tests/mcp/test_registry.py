"""Servers nobody here wrote, from the npm registry: server-everything and server-filesystem."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.actors import open_runtime
from deepactors.errors import ConfigurationError
from deepactors.events import CustomEvent
from deepactors.mcp import MCPServer
from deepactors.messages import ImageBlock
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def turns(*turns: list[ToolCall], seen: list[ModelRequest] | None = None) -> FunctionModel:
    """A model making the calls of turn ``i`` on its ``i``-th answer, then quoting the last."""

    def answer(request: ModelRequest) -> AssistantMessage:
        if seen is not None:
            seen.append(request)
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done < len(turns):
            return AssistantMessage(tool_calls=turns[done])
        last = next(m for m in reversed(request.messages) if isinstance(m, ToolMessage))
        return AssistantMessage(content=last.text)

    return FunctionModel(answer)


def results(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.name: m for m in state["messages"] if isinstance(m, ToolMessage)}


def children_running(name: str) -> list[int]:
    """Our child processes whose command line mentions ``name``."""
    me, out = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and name in cmdline:
            out.append(int(proc.name))
    return out


@pytest.fixture
def everything(npm_bin: Path) -> MCPServer:
    return MCPServer.stdio(str(npm_bin / "mcp-server-everything"), name="everything")


@pytest.fixture
def filesystem(npm_bin: Path, tmp_path: Path) -> MCPServer:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    return MCPServer.stdio(
        str(npm_bin / "mcp-server-filesystem"), [str(tmp_path)], name="fs", prefix="fs_"
    )


async def test_server_everything_schemas_text_images_resources_and_structured_content(
    everything: MCPServer,
) -> None:
    seen: list[ModelRequest] = []
    model = turns(
        [
            ToolCall(name="echo", args={"message": "hello"}),
            ToolCall(name="get-tiny-image", args={}),
            ToolCall(name="get-resource-reference", args={"resourceType": "Text", "resourceId": 2}),
            ToolCall(name="get-structured-content", args={"location": "Chicago"}),
        ],
        seen=seen,
    )
    agent = create_deep_agent(model, mcp_servers={"everything": everything})
    with anyio.fail_after(60):
        state = await agent.ainvoke("go")
    echo_tool = next(t for t in seen[0].tools if t.name == "echo")
    assert echo_tool.parameters["properties"]["message"] == {
        "type": "string",
        "description": "Message to echo",
    }
    got = results(state)
    assert "hello" in got["echo"].text
    image = got["get-tiny-image"].content
    assert isinstance(image, list)
    assert any(isinstance(b, ImageBlock) and b.source["media_type"] == "image/png" for b in image)
    assert "demo://resource/dynamic/text/2" in got["get-resource-reference"].text
    assert '"temperature"' in got["get-structured-content"].text


async def test_server_filesystem_needs_a_prefix_beside_the_built_in_file_tools(
    npm_bin: Path, tmp_path: Path
) -> None:
    bare = MCPServer.stdio(str(npm_bin / "mcp-server-filesystem"), [str(tmp_path)], name="fs")
    agent = create_deep_agent(turns([]), mcp_servers={"fs": bare})
    with anyio.fail_after(60), pytest.raises(ConfigurationError, match=r"'read_file'.*prefix="):
        await agent.ainvoke("go")


async def test_100_subagents_read_through_one_server_filesystem_process(
    filesystem: MCPServer, tmp_path: Path
) -> None:
    n = 100
    reader = {
        "name": "reader",
        "description": "reads a file with the fs server",
        "system_prompt": "read",
        "model": turns(
            [ToolCall(name="fs_read_text_file", args={"path": str(tmp_path / "notes.txt")})]
        ),
        "tools": [filesystem],
    }
    fan_out = [
        ToolCall(name="task", args={"description": f"read {i}", "subagent_type": "reader"})
        for i in range(n)
    ]
    agent = create_deep_agent(turns(fan_out), subagents=[reader], max_concurrent_subagents=n)
    with anyio.fail_after(120):
        async with open_runtime() as rt:
            state = await rt.thread(agent).ainvoke("go")
            servers = children_running("mcp-server-filesystem")
    answers = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == n
    assert all("alpha\nbeta" in a for a in answers)
    assert len(servers) == 1  # one process for the whole tree
    assert children_running("mcp-server-filesystem") == []  # gone with the runtime


async def test_a_servers_progress_notifications_become_run_events(everything: MCPServer) -> None:
    model = turns(
        [ToolCall(name="trigger-long-running-operation", args={"duration": 0.3, "steps": 3})]
    )
    agent = create_deep_agent(model, mcp_servers={"everything": everything})
    progress: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with agent.astream("go") as stream:
            async for event in stream:
                if isinstance(event, CustomEvent) and "mcp_progress" in event.data:
                    progress.append(event.data["mcp_progress"])
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert {(p["server"], p["tool"], p["total"]) for p in progress} == {
        ("everything", "trigger-long-running-operation", 3)
    }

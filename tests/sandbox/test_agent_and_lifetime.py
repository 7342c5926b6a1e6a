"""A deep agent in a sandbox; per-thread workspaces; many at once; closing; unavailability."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, ScriptedModel, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import (
    BubblewrapSandbox,
    CompositeBackend,
    SandboxBackend,
    SandboxKey,
    SandboxProvider,
    StoreBackend,
    sandbox_scope,
)
from deepactors.errors import FileNotFound, SandboxError, SandboxUnavailable
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer, MemoryStore
from tests.waiting import wait_until

from .conftest import alive

pytestmark = pytest.mark.anyio

Turn = list[tuple[str, dict[str, Any]]]


def turns(*calls: Turn, last: str = "done") -> list[AssistantMessage | str]:
    return [
        AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in turn]) for turn in calls
    ] + [last]


def results(state: dict[str, Any]) -> list[str]:
    return [m.text for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_a_deep_agent_and_its_subagent_work_in_the_threads_sandbox(
    sandbox_root: Path,
) -> None:
    child = ScriptedModel(
        turns(
            [("write_file", {"file_path": "/child.txt", "content": "from the child\n"})],
            [("execute", {"command": "cat /workspace/parent.txt child.txt | wc -l"})],
            last="child done",
        )
    )
    main = ScriptedModel(
        turns(
            [("write_file", {"file_path": "/parent.txt", "content": "one\ntwo\n"})],
            [("execute", {"command": "cat parent.txt; echo made > out.txt; exit 3"})],
            [("read_file", {"file_path": "/out.txt"})],
            [("task", {"description": "count", "subagent_type": "helper"})],
            [("execute", {"command": "cat child.txt"})],
        )
    )
    async with BubblewrapSandbox(sandbox_root) as sandbox:
        agent = create_deep_agent(
            main,
            backend=sandbox,
            checkpointer=MemoryCheckpointer(),
            subagents=[
                {"name": "helper", "description": "h", "system_prompt": "h", "model": child}
            ],
        )
        assert "execute" in agent.tools
        state = await agent.ainvoke({"messages": "go"}, thread_id="t-agent")
    texts = results(state)
    assert "one\ntwo" in texts[1]
    assert "3" in texts[1]  # the exit code
    assert "made" in texts[2]
    assert "child done" in texts[3]
    assert "from the child" in texts[4]
    # The files are in that thread's workspace, on the host.
    ws = sandbox_root / SandboxKey("t-agent").slug
    assert sorted(os.listdir(ws)) == ["child.txt", "out.txt", "parent.txt"]


async def test_many_sandboxes_at_once_each_sees_only_its_own(sandbox_root: Path) -> None:
    n = 12
    outputs: dict[int, str] = {}
    async with BubblewrapSandbox(sandbox_root, timeout=60) as sandbox:

        async def one(i: int) -> None:
            with sandbox_scope(SandboxKey(f"thread-{i}", f"user-{i % 3}")):
                await sandbox.write("/mine.txt", f"{i}\n")
                result = await sandbox.execute("sleep 0.2; cat /workspace/*.txt; ls | wc -l")
                outputs[i] = result.output

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    for i in range(n):
        assert outputs[i].split() == [str(i), "1"]
    assert await alive("sleep 0.2") == []


async def test_a_shared_sandbox_needs_no_thread(sandbox_root: Path) -> None:
    async with BubblewrapSandbox(sandbox_root, per_thread=False) as sandbox:
        await sandbox.execute("echo shared > a.txt")
        with sandbox_scope(SandboxKey("any")):
            assert (await sandbox.read("/a.txt")).text == "shared"
    assert (sandbox_root / "a.txt").read_text() == "shared\n"


async def test_outside_a_thread_a_per_thread_sandbox_reads_nothing_and_runs_nothing(
    sandbox_root: Path,
) -> None:
    async with BubblewrapSandbox(sandbox_root) as sandbox:
        with sandbox_scope(SandboxKey("t")):
            await sandbox.write("/AGENTS.md", "thread t's notes\n")
        with pytest.raises(SandboxError, match="per-thread"):
            await sandbox.execute("echo where")
        with pytest.raises(SandboxError, match="per-thread"):
            await sandbox.write("/x.txt", "where")
        assert await sandbox.ls("/") == []
        assert await sandbox.glob("**/*") == []
        assert (await sandbox.grep("notes")).matches == ()
        with pytest.raises(FileNotFound):
            await sandbox.read("/AGENTS.md")


async def test_memory_skills_and_a_long_output_do_not_stop_a_run_on_a_per_thread_sandbox(
    sandbox_root: Path,
) -> None:
    model = ScriptedModel(
        turns([("execute", {"command": "head -c 90000 /dev/zero | tr '\\0' a"})], last="ok")
    )
    async with BubblewrapSandbox(sandbox_root) as sandbox:
        agent = create_deep_agent(
            model,
            backend=sandbox,
            memory=["/AGENTS.md"],
            skills=["/skills/"],
            checkpointer=MemoryCheckpointer(),
        )
        state = await agent.ainvoke({"messages": "go"}, thread_id="t-mem")
    assert state["messages"][-1].text == "ok"
    output = results(state)[0]
    assert "output truncated" in output
    assert len(output) < 60_000  # the cap, under the size past which results move to files


async def test_memory_in_a_store_route_beside_a_per_thread_sandbox(sandbox_root: Path) -> None:
    store = MemoryStore()
    await store.put(("mem",), "/AGENTS.md", {"content": "Always answer in haiku.\n"})
    seen: list[str] = []

    def model(request: ModelRequest) -> AssistantMessage | str:
        seen.append(" ".join(m.text for m in request.messages))
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            calls = [
                ToolCall(name="write_file", args={"file_path": "/work.txt", "content": "w\n"}),
                ToolCall(name="execute", args={"command": "ls"}),
            ]
            return AssistantMessage(tool_calls=calls)
        return "ok"

    async with BubblewrapSandbox(sandbox_root) as sandbox:
        backend = CompositeBackend(
            sandbox, routes={"/memories/": StoreBackend(store, namespace=("mem",))}
        )
        agent = create_deep_agent(
            FunctionModel(model),
            backend=backend,
            memory=["/memories/AGENTS.md"],
            checkpointer=MemoryCheckpointer(),
        )
        state = await agent.ainvoke({"messages": "go"}, thread_id="t-routes")
    assert "haiku" in seen[0]
    texts = results(state)
    assert any("work.txt" in t for t in texts)
    assert (sandbox_root / SandboxKey("t-routes").slug / "work.txt").read_text() == "w\n"


async def test_closing_kills_running_commands_and_refuses_more(sandbox_root: Path) -> None:
    sandbox = BubblewrapSandbox(sandbox_root, cleanup=True)
    caught: list[BaseException] = []

    async def run() -> None:
        with sandbox_scope(SandboxKey("t")):
            try:
                await sandbox.execute("echo hi > f; sleep 1000.0091")
            except SandboxError as exc:
                caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        # A host process, not an event: polled.
        await wait_until(lambda: alive("1000.0091"), what="the command running", timeout=30)
        await sandbox.aclose()
    assert caught
    assert "closed" in str(caught[0])
    assert await alive("1000.0091") == []
    assert not (sandbox_root / SandboxKey("t").slug).exists()  # cleanup=True
    with pytest.raises(SandboxError, match="closed"), sandbox_scope(SandboxKey("t")):
        await sandbox.execute("true")


async def test_closing_a_workspace_opened_for_a_key_kills_its_commands(
    sandbox_root: Path,
) -> None:
    async with BubblewrapSandbox(sandbox_root) as sandbox:
        opened = await sandbox.open_sandbox(SandboxKey("t-open"))
        caught: list[BaseException] = []

        async def run() -> None:
            try:
                await opened.execute("sleep 1000.0092")
            except SandboxError as exc:
                caught.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await wait_until(lambda: alive("1000.0092"), what="the command running", timeout=30)
            await opened.aclose()
        assert len(caught) == 1
        assert await alive("1000.0092") == []
        with pytest.raises(SandboxError, match="closed"):
            await opened.execute("true")


async def test_the_protocols_fit(sandbox_root: Path) -> None:
    async with BubblewrapSandbox(sandbox_root) as sandbox:
        assert isinstance(sandbox, SandboxProvider)
        opened = await sandbox.open_sandbox(SandboxKey("t"))
        assert isinstance(opened, SandboxBackend)
        assert opened.workspace == "/workspace"
        assert (await opened.execute("pwd")).output.strip() == "/workspace"
        assert opened is await sandbox.open_sandbox(SandboxKey("t"))


async def test_unavailable_without_bubblewrap_and_nothing_runs_on_the_host(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    marker = tmp_path / "ran"
    sandbox = BubblewrapSandbox(sandbox_root, per_thread=False)
    with pytest.raises(SandboxUnavailable, match="not installed"):
        await sandbox.execute(f"touch {marker}")
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run commands as another user")
async def test_unavailable_when_bwrap_cannot_set_up_says_why(tmp_path: Path) -> None:
    # pytest's tmp_path is under a folder only root may enter: nobody cannot bind it.
    sandbox = BubblewrapSandbox(tmp_path / "ws", per_thread=False)
    with pytest.raises(SandboxUnavailable, match="bubblewrap cannot create the sandbox") as info:
        async with sandbox:
            pass
    assert "uid 65534, which must be able to reach" in str(info.value)
    with pytest.raises(SandboxUnavailable):  # remembered, not retried
        await sandbox.execute("true")


async def test_memory_in_the_threads_workspace_is_read_before_any_tool_call(
    sandbox_root: Path,
) -> None:
    """Middleware that reads files outside a tool call (memory) reaches the
    thread's workspace: the run carries its sandbox key for all of it."""
    seen: list[str] = []

    def model(request: ModelRequest) -> AssistantMessage:
        seen.append("\n".join(m.text for m in request.messages))
        return AssistantMessage(content="ok")

    async with BubblewrapSandbox(sandbox_root) as sandbox:
        for thread, note in (("t-mem-1", "prefers tabs"), ("t-mem-2", "prefers spaces")):
            workspace = sandbox_root / SandboxKey(thread).slug
            workspace.mkdir(parents=True, exist_ok=True)
            (workspace / "AGENTS.md").write_text(f"The user {note}.\n")
        agent = create_deep_agent(
            FunctionModel(model),
            backend=sandbox,
            memory=["/AGENTS.md"],
            checkpointer=MemoryCheckpointer(),
        )
        await agent.ainvoke({"messages": "hi"}, thread_id="t-mem-1")
        await agent.ainvoke({"messages": "hi"}, thread_id="t-mem-2")
    assert "The user prefers tabs." in seen[0]
    assert "prefers spaces" not in seen[0]
    assert "The user prefers spaces." in seen[1]

"""One session per server per runtime, shared by a tree; cancellation reaches the server; deaths."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.actors import await_handle, open_runtime
from deepactors.errors import RunCancelled, ToolError
from deepactors.mcp import MCPServer
from deepactors.models import FunctionModel, ModelRequest
from tests.mcp.servers import (
    SDK_HTTP_ON_TRIO,
    alive,
    app_server,
    events,
    free_port,
    start_http_app,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.anyio


async def until(log: Path, prefix: str, count: int) -> None:
    """Wait until the server has written ``count`` lines starting with ``prefix``."""
    # Polled: the lines come from another process; bounded as the callers' fail_after.
    await wait_until(
        lambda: sum(e.startswith(prefix) for e in events(log)) >= count,
        what=f"{count} {prefix!r} lines in the MCP server's log",
        timeout=60,
        interval=0.02,
    )


def starts(log: Path) -> list[int]:
    return [int(e.split()[1]) for e in events(log) if e.startswith("start")]


def turns(*turns: list[ToolCall]) -> FunctionModel:
    """A model making the calls of turn ``i`` on its ``i``-th answer, then saying "done"."""

    def answer(request: ModelRequest) -> AssistantMessage:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done < len(turns):
            return AssistantMessage(tool_calls=turns[done])
        last = next(m for m in reversed(request.messages) if isinstance(m, ToolMessage))
        return AssistantMessage(content=last.text)

    return FunctionModel(answer)


def call(name: str, **args: object) -> ToolCall:
    return ToolCall(name=name, args=args)


@pytest.mark.usefixtures("blocking_detector")
async def test_200_subagents_share_one_server_process_reaped_when_the_runtime_closes(
    app_log: Path,
) -> None:
    n = 200
    worker = {
        "name": "worker",
        "description": "calls the server",
        "system_prompt": "work",
        "model": turns([call("busy")]),
    }
    fan_out = [call("task", description=f"job {i}", subagent_type="worker") for i in range(n)]
    agent = create_deep_agent(
        turns(fan_out),
        subagents=[worker],
        mcp_servers={"app": app_server(app_log, max_in_flight=4)},
        max_concurrent_subagents=n,
    )
    with anyio.fail_after(120):
        async with open_runtime() as rt:
            state = await rt.thread(agent).ainvoke("go")
            (pid,) = starts(app_log)
            assert alive(pid)
    answers = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == n
    pids = {a.split()[0] for a in answers}
    peaks = [int(a.split()[1]) for a in answers]
    assert pids == {str(pid)}  # every subagent, one process
    assert 1 <= max(peaks) <= 4  # the cap on calls in flight
    assert not alive(pid)  # ended and reaped with the runtime: no zombie
    assert events(app_log).count("list") == 1  # the tools listed once for the tree


async def test_each_plain_ainvoke_has_its_own_session(app_log: Path) -> None:
    agent = create_deep_agent(turns([call("pid")]), tools=[app_server(app_log)])
    with anyio.fail_after(60):
        first = await agent.ainvoke("go")
        second = await agent.ainvoke("go")
    pids = starts(app_log)
    assert len(pids) == 2
    assert [first["messages"][-1].text, second["messages"][-1].text] == [str(p) for p in pids]
    assert not any(alive(p) for p in pids)


@pytest.mark.parametrize("how", ["deadline", "cancel"])
@pytest.mark.usefixtures("blocking_detector")
async def test_cancelled_calls_reach_the_server_as_cancel_notifications(
    app_log: Path, how: str
) -> None:
    tags = [f"t{i}" for i in range(50)]
    agent = create_deep_agent(
        turns([call("hang", tag=t) for t in tags]), mcp_servers={"app": app_server(app_log)}
    )
    warm = create_deep_agent(
        turns([call("echo", text="up")]), mcp_servers={"app": app_server(app_log)}
    )
    with anyio.fail_after(60):
        async with open_runtime() as rt:
            await rt.thread(warm).ainvoke("start the server first")
            if how == "deadline":
                # Short: the server is up (warm); its 50 calls reach it well within.
                with pytest.raises(TimeoutError):
                    await rt.thread(agent).ainvoke("go", timeout=2)
            else:
                handle = await rt.thread(agent).start("go")
                await until(app_log, "hang", len(tags))
                handle.cancel()
                with pytest.raises(RunCancelled):
                    await await_handle(handle)
            # The server is still up (same session): it says when the handlers stopped.
            await until(app_log, "cancelled", len(tags))
            after = await rt.thread(warm).ainvoke("still there?")
    assert after["messages"][-1].text == "echo: up"
    cancelled = [e.split()[1] for e in events(app_log) if e.startswith("cancelled")]
    assert sorted(cancelled) == sorted(tags)  # each call, told to the server
    assert len(starts(app_log)) == 1


@pytest.mark.usefixtures("blocking_detector")
async def test_a_server_that_dies_mid_call_is_an_error_the_model_reads_then_restarts(
    app_log: Path,
) -> None:
    agent = create_deep_agent(
        turns([call("crash")], [call("echo", text="again")]),
        mcp_servers={"app": app_server(app_log)},
    )
    with anyio.fail_after(60):
        state = await agent.ainvoke("go")
    crash, echo = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert crash.status == "error"
    assert "closed the connection" in crash.text
    assert "crash: the test asked for it" in crash.text  # its last words, from its stderr
    assert echo.status == "success"
    assert echo.text == "echo: again"
    pids = starts(app_log)
    assert len(pids) == 2
    assert not any(alive(p) for p in pids)


async def test_a_server_that_cannot_start_is_a_clear_error() -> None:
    missing = MCPServer.stdio("/nonexistent/mcp-server", name="ghost")
    agent = create_deep_agent(turns([call("x")]), mcp_servers={"ghost": missing})
    with anyio.fail_after(30), pytest.raises(ToolError, match="'ghost' could not be started"):
        await agent.ainvoke("go")

    mute = MCPServer.stdio(
        sys.executable, ["-c", "import sys; print('no MCP here', file=sys.stderr)"], name="mute"
    )
    agent = create_deep_agent(turns([call("x")]), mcp_servers={"mute": mute})
    with anyio.fail_after(30), pytest.raises(ToolError, match="handshake") as caught:
        await agent.ainvoke("go")
    assert "no MCP here" in str(caught.value)


async def test_a_call_past_its_call_timeout_is_cancelled_on_the_server_too(
    app_log: Path,
) -> None:
    agent = create_deep_agent(
        turns([call("hang", tag="slow")], [call("echo", text="next")]),
        mcp_servers={"app": app_server(app_log, call_timeout=0.5)},
    )
    with anyio.fail_after(60):
        async with open_runtime() as rt:
            state = await rt.thread(agent).ainvoke("go")
            await until(app_log, "cancelled", 1)
    hang, echo = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert hang.status == "error"
    assert "took longer than 0.5 s" in hang.text
    assert echo.text == "echo: next"
    assert len(starts(app_log)) == 1


async def test_one_server_named_twice_with_other_filters_is_still_one_session(
    app_log: Path,
) -> None:
    child = {
        "name": "child",
        "description": "echoes",
        "system_prompt": "echo",
        "model": turns([call("b_echo", text="child")]),
        "tools": [app_server(app_log, prefix="b_")],
    }
    agent = create_deep_agent(
        turns(
            [call("a_echo", text="parent")],
            [call("task", description="echo", subagent_type="child")],
        ),
        tools=[app_server(app_log, prefix="a_", include={"echo"})],
        subagents=[child],
    )
    with anyio.fail_after(60):
        state = await agent.ainvoke("go")
    texts = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    assert texts == ["echo: parent", "echo: child"]
    assert len(starts(app_log)) == 1


@SDK_HTTP_ON_TRIO
async def test_an_http_server_that_goes_away_is_reconnected_when_it_is_back(
    tmp_path: Path,
) -> None:
    port, log = free_port(), tmp_path / "http.log"
    proc = await anyio.to_thread.run_sync(start_http_app, port, log)
    server = MCPServer.http(f"http://127.0.0.1:{port}/mcp", name="web")
    agent = create_deep_agent(turns([call("echo", text="hi")]), mcp_servers={"web": server})
    try:
        with anyio.fail_after(90):
            async with open_runtime() as rt:
                first = await rt.thread(agent).ainvoke("go")
                proc.kill()
                await anyio.to_thread.run_sync(proc.wait)
                lost = await rt.thread(agent).ainvoke("go")
                down = await rt.thread(agent).ainvoke("go")
                proc = await anyio.to_thread.run_sync(start_http_app, port, log)
                back = await rt.thread(agent).ainvoke("go")
    finally:
        proc.kill()
        await anyio.to_thread.run_sync(proc.wait)
    assert first["messages"][-1].text == "echo: hi"
    assert "'web' closed the connection" in lost["messages"][-1].text
    assert "it will be reconnected on the next call" in lost["messages"][-1].text
    assert "'web' could not be reached: ConnectError" in down["messages"][-1].text
    assert back["messages"][-1].text == "echo: hi"

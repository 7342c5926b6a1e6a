"""Each agent's MCP options hold, sessions are bounded, answers are bounded (issue 41, 1, 9, 10d).

- Two agents on one server each get their own ``call_timeout``, whichever
  opened the session; ``max_in_flight`` is a session's (agents that differ in
  it get a session each).
- A runtime keeps at most ``MAX_IDLE_SESSIONS`` idle sessions: a token per user
  does not hold a session per user for ever.
- An answer past ``max_answer_bytes`` is refused while it is read: the client's
  memory grows by about the cap, not by the answer (stdio, and HTTP both as an
  event stream and as plain JSON).
- A server stuck in a call that a run's deadline cut off is stopped within that
  deadline: the stdin grace is not waited for.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.actors import open_runtime
from deepactors.errors import ConfigurationError
from deepactors.mcp import MAX_IDLE_SESSIONS, MCPServer, _pool, set_max_idle_sessions
from deepactors.models import FunctionModel, ModelRequest
from tests.mcp.servers import (
    ROOT,
    SDK_HTTP_ON_TRIO,
    alive,
    app_server,
    events,
    free_port,
    start_http_app,
)

pytestmark = pytest.mark.anyio


def turns(*turns: list[ToolCall]) -> FunctionModel:
    """A model making the calls of turn ``i`` on its ``i``-th answer, then quoting the results."""

    def answer(request: ModelRequest) -> AssistantMessage:
        done = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if done < len(turns):
            return AssistantMessage(tool_calls=turns[done])
        results = [m.text for m in request.messages if isinstance(m, ToolMessage)]
        return AssistantMessage(content="\n".join(results))

    return FunctionModel(answer)


def call(name: str, **args: object) -> ToolCall:
    return ToolCall(name=name, args=args)


def starts(log: Path) -> list[int]:
    return [int(e.split()[1]) for e in events(log) if e.startswith("start")]


# --- 1. options per agent -------------------------------------------------------------


@pytest.mark.parametrize("first", ["short", "long"])
async def test_each_agent_s_call_timeout_holds_whichever_opened_the_session(
    app_log: Path, first: str
) -> None:
    # Short, so that the test waits little; apart, so each message tells whose held.
    timeouts = {"short": 0.5, "long": 1}
    agents = {
        name: create_deep_agent(
            turns([call("hang", tag=name)]),
            tools=[app_server(app_log, call_timeout=seconds)],
        )
        for name, seconds in timeouts.items()
    }
    second = "long" if first == "short" else "short"
    with anyio.fail_after(90):
        async with open_runtime() as rt:
            answers = {
                name: await rt.thread(agents[name]).ainvoke("go") for name in (first, second)
            }
    for name, seconds in timeouts.items():
        assert f"took longer than {seconds} s" in answers[name]["messages"][-1].text
    assert len(starts(app_log)) == 1  # one session: the timeout is each call's own


async def test_max_in_flight_is_each_session_s_own(app_log: Path) -> None:
    wide = create_deep_agent(
        turns([call("busy") for _ in range(6)]), tools=[app_server(app_log, max_in_flight=8)]
    )
    narrow = create_deep_agent(
        turns([call("busy") for _ in range(6)]), tools=[app_server(app_log, max_in_flight=1)]
    )
    with anyio.fail_after(90):
        async with open_runtime() as rt:
            await rt.thread(wide).ainvoke("go")  # opens its session first
            state = await rt.thread(narrow).ainvoke("go")
    peaks = [int(m.text.split()[1]) for m in state["messages"] if isinstance(m, ToolMessage)]
    assert max(peaks) == 1
    assert len(starts(app_log)) == 2  # a session for each max_in_flight


# --- 1. a bounded number of sessions ---------------------------------------------------


@pytest.fixture
def own_http_app(tmp_path: Path) -> Iterator[str]:
    """Our test server over HTTP, for this test alone (it counts the sessions held open)."""
    port = free_port()
    proc = start_http_app(port, tmp_path / "http.log")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@SDK_HTTP_ON_TRIO
async def test_a_token_per_user_keeps_a_bounded_number_of_sessions_open(
    own_http_app: str,
) -> None:
    # A lower bound than the default (MAX_IDLE_SESSIONS, 32): the same pruning,
    # a dozen sessions opened instead of forty.
    bound = 4
    users = bound + 8
    with anyio.fail_after(240):
        async with open_runtime() as rt:
            set_max_idle_sessions(rt, bound)
            for i in range(users):
                server = MCPServer.http(own_http_app, name="app", auth_token=f"token-of-user-{i}")
                agent = create_deep_agent(turns([call("echo", text=str(i))]), tools=[server])
                state = await rt.thread(agent).ainvoke("go")
                assert state["messages"][-1].text == f"echo: {i}"
            counter = create_deep_agent(
                turns([call("sessions")]), tools=[MCPServer.http(own_http_app, name="app")]
            )
            state = await rt.thread(counter).ainvoke("how many?")
    # The ones past the bound were closed (the server was told); the counter's is one.
    assert int(state["messages"][-1].text) <= bound + 1
    assert MAX_IDLE_SESSIONS == 32  # the default, left as it was


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4", None])
async def test_a_bad_bound_on_idle_sessions_is_refused_and_the_bound_kept(bad: Any) -> None:
    async with open_runtime() as rt:
        set_max_idle_sessions(rt, 3)
        with pytest.raises(ConfigurationError, match=r"max_idle: .*an int >= 0"):
            set_max_idle_sessions(rt, bad)
        assert rt.shared(_pool._POOL).max_idle == 3  # the bound it had
        set_max_idle_sessions(rt, 0)  # none kept: allowed


# --- 9. answers bounded while they are read --------------------------------------------


@pytest.fixture(scope="module", params=["stdio", "http", "http-json"])
def answer_source(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Where the big answer comes from: ``stdio``, or the URL of our server over HTTP
    (answering as an event stream, or as plain JSON). One HTTP server per mode for
    the module: each probe opens a session of its own, and the server keeps nothing
    of a refused answer."""
    if request.param == "stdio":
        yield "stdio"
        return
    port = free_port()
    proc = start_http_app(port, tmp_path_factory.mktemp("http") / "http.log", mode=request.param)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_an_answer_past_the_cap_is_refused_while_it_is_read(
    answer_source: str, anyio_backend: object, tmp_path: Path
) -> None:
    # A cap well below the default and an answer twelve times past it: the same
    # code path as a 100 MB answer past an 8 MiB cap, in a fraction of the time.
    cap = 2 * 1024 * 1024
    loop = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]  # type: ignore[index]
    # A process of its own: its peak resident size is this run's.
    command = [
        sys.executable,
        "-m",
        "tests.mcp.answer_probe",
        answer_source,
        str(loop),
        str(cap),
        "24",
        str(tmp_path / "app.log"),
    ]
    with anyio.fail_after(240):
        done = await anyio.run_process(command, cwd=ROOT)
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["status"] == "error"
    assert f"larger than max_answer_bytes={cap} bytes and was not read" in seen["text"]
    # A 24 MB answer (48 MB as the SDK's server sends it, structured content
    # beside the text): the peak grows by about the cap, the bytes kept while
    # reading, plus what the reading machinery holds beside them.
    grown = seen["after"] - seen["before"]
    assert grown < 1.5 * cap, f"{grown / 2**20:.1f} MiB for a cap of {cap / 2**20:.0f} MiB"


# --- 10d. a stuck server does not outlive the run's deadline ---------------------------


async def test_a_stuck_server_is_stopped_within_the_run_s_deadline(
    app_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = app_server(app_log)
    warm = create_deep_agent(turns([call("echo", text="up")]), tools=[server])
    stuck = create_deep_agent(turns([call("block", seconds=60)]), tools=[server])
    caplog.set_level(logging.DEBUG, logger="deepactors.mcp")
    timeout = 1.5  # the server is up (warm): the stuck call starts at once
    with anyio.fail_after(90):
        # As a plain ainvoke(timeout=) does: a runtime for the run, closed after
        # it (the server started first, so that the deadline finds it stuck).
        async with open_runtime() as rt:
            await rt.thread(warm).ainvoke("start the server")
            with pytest.raises(TimeoutError):
                await rt.thread(stuck).ainvoke("go", timeout=timeout)
    (pid,) = starts(app_log)
    assert "block" in events(app_log)
    assert not alive(pid)  # stopped and reaped before the runtime closed
    stops = [r.getMessage() for r in caplog.records if r.getMessage().startswith("MCP server app:")]
    # Signalled at once, not asked to exit by closing its stdin and waited for
    # (the SDK closed the server's stdin and waited its grace, STDIN_GRACE, for a
    # server that reads nothing, then sent SIGTERM: the run outlived its deadline).
    assert stops[-1] in ("MCP server app: stopped by SIGTERM", "MCP server app: killed"), stops

"""PostgreSQL restarted under a running agent (issue 34, items 1 and 7).

A restart ends every session the process had open: pooled connections, the
kept writer, the lease connections of runs in flight. The first run after the
database is back must not fail on one of those; a run in flight fails with an
error that names the database; and while the database is down, a run's
deadline bounds its wait for a connection on both loops (on trio the wait is
in a worker thread, which a cancellation used not to reach: the run returned
after the pool's 30 s).

The tests restart a server of this module's own (``tests/pgserver.py``), not
the session's, which other tests use at the same time.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.agent import DeepAgent
from deepactors.errors import CheckpointError
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import PostgresCheckpointer
from tests.pgserver import PostgresServer

POOL_TIMEOUT = 30.0
"""psycopg's pool waits this long for a connection; a deadline must cut it short."""


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def server(own_server: PostgresServer) -> PostgresServer:
    """This module's server, up (a test that failed may have left it down)."""
    if not own_server.running:
        own_server.start()
    return own_server


@pytest.fixture
def dsn(server: PostgresServer) -> str:
    """A fresh database on it, for one test."""
    return server.new_database()


def _answer(request: ModelRequest) -> AssistantMessage:
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return AssistantMessage(content="done: " + last.text)
    if last.text == "wait":
        return AssistantMessage(tool_calls=[ToolCall(name="wait", args={})])
    return AssistantMessage(content="hello")


def _input(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def _agent(
    cp: PostgresCheckpointer, release: anyio.Event | None = None
) -> tuple[DeepAgent, anyio.Event]:
    """The agent, and the event its ``wait`` tool sets once called."""
    started = anyio.Event()

    async def wait() -> str:
        """Wait until the test releases the run."""
        started.set()
        assert release is not None
        await release.wait()
        return "released"

    return create_deep_agent(FunctionModel(_answer), tools=[wait], checkpointer=cp), started


async def test_the_first_runs_after_a_database_restart_succeed(
    server: PostgresServer, dsn: str
) -> None:
    async with PostgresCheckpointer(dsn) as cp:
        agent, _ = _agent(cp)
        await agent.ainvoke(_input("hi"), thread_id="before")
        await anyio.to_thread.run_sync(server.restart)
        # Every connection the process kept (pooled, the writer) is dead now:
        # each is noticed and replaced, not handed to a run.
        for n in range(3):
            result = await agent.ainvoke(_input("hi"), thread_id="before")
            assert result["messages"][-1].text == "hello"
            await agent.ainvoke(_input("hi"), thread_id=f"new-{n}")
        assert len((await agent.ainvoke(_input("hi"), thread_id="before"))["messages"]) == 10


async def test_a_run_in_flight_during_a_restart_fails_naming_the_database(
    server: PostgresServer, dsn: str
) -> None:
    release = anyio.Event()
    async with PostgresCheckpointer(dsn) as cp:
        agent, tool_started = _agent(cp, release)
        failure: list[BaseException] = []

        async def run() -> None:
            try:
                await agent.ainvoke(_input("wait"), thread_id="in-flight")
            except CheckpointError as exc:
                failure.append(exc)

        with anyio.fail_after(POOL_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await tool_started.wait()
                # Its lease (a session lock) ends with the restart: what it
                # saves next must not land as if it still held the thread.
                await anyio.to_thread.run_sync(server.restart)
                release.set()
        assert failure, "the run went on as if it still held its thread"
        assert cp.location in str(failure[0])
        # The thread itself is fine: the next run on it succeeds.
        result = await agent.ainvoke(_input("hi"), thread_id="in-flight")
        assert result["messages"][-1].text == "hello"


async def test_a_run_deadline_bounds_its_wait_for_a_database_that_is_down(
    server: PostgresServer, dsn: str
) -> None:
    async with PostgresCheckpointer(dsn) as cp:
        agent, _ = _agent(cp)
        await agent.ainvoke(_input("hi"), thread_id="t")
        await anyio.to_thread.run_sync(server.stop)
        try:
            # Well inside the pool's own timeout, which used to be what
            # ended the wait on trio.
            with anyio.fail_after(POOL_TIMEOUT - 10):
                for thread_id in ("t", "other"):
                    with pytest.raises(TimeoutError):
                        await agent.ainvoke(_input("hi"), thread_id=thread_id, timeout=2)
        finally:
            await anyio.to_thread.run_sync(server.start)
        # Back: the pools reconnect, the next run succeeds.
        with anyio.fail_after(POOL_TIMEOUT):
            result = await agent.ainvoke(_input("hi"), thread_id="t")
        assert result["messages"][-1].text == "hello"

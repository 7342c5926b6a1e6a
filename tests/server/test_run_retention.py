"""The server lets go of finished runs: no cycle, a retention period, idle threads' values.

Each test runs a real server (uvicorn on asyncio, hypercorn on trio) and looks
at its run manager from the test's thread. Whether a record is freed is checked
with the cyclic collector disabled: reference counting alone must free it
(``deepactors serve`` defers and freezes collections, so a cycle would stay).
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.errors import ConfigurationError
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer
from deepactors.server import ServeOptions, create_app
from deepactors.server._serve import build_app
from tests.waiting import wait_until_sync

from .conftest import Served

BIG = 100_000
"""Characters of each run's answer: what a leak of its values would show."""


class Gate:
    """Holds every run in its tool until the test lets go (across threads)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()


def gated_agent(gate: Gate, **kwargs: Any) -> Any:
    """One tool call that waits for the gate, then a big answer."""

    async def hold() -> str:
        """Wait until the test lets the run go on."""
        gate.entered.release()
        with anyio.fail_after(20):
            await anyio.to_thread.run_sync(gate.release.wait, abandon_on_cancel=True)
        return "held"

    def main(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="hold", args={})])
        return AssistantMessage(content="a" * BIG)

    return create_deep_agent(FunctionModel(main), tools=[hold], **kwargs)


def failing_agent(gate: Gate) -> Any:
    """As :func:`gated_agent`, but its model fails after the tool (a traceback to keep)."""

    async def hold() -> str:
        """Wait until the test lets the run go on."""
        gate.entered.release()
        with anyio.fail_after(20):
            await anyio.to_thread.run_sync(gate.release.wait, abandon_on_cancel=True)
        return "held"

    def main(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="hold", args={})])
        raise RuntimeError("the model broke " + "c" * BIG)

    return create_deep_agent(FunctionModel(main), tools=[hold])


def big_agent(**kwargs: Any) -> Any:
    """Answers at once, with a big answer that says which turn it is."""

    def main(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content=f"turn {len(request.messages)} " + "b" * BIG)

    return create_deep_agent(FunctionModel(main), **kwargs)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic collector off (what is freed is freed by reference counting)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def message(text: str = "go") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def held_record(served: Served, gate: Gate, run_id: str) -> tuple[weakref.ref[Any], str]:
    """A weak reference to a run's record, taken while the run waits in its tool."""
    assert gate.entered.acquire(timeout=20)
    record = served.runs.runs[run_id]
    return weakref.ref(record), record.thread.thread_id


def test_a_finished_stateless_run_is_freed_by_reference_counting(
    serve: Callable[..., Served], no_collector: None
) -> None:
    gate = Gate()
    served = serve(create_app({"agent": gated_agent(gate)}))
    client = served.client()
    run = client.runs.create(None, "agent", input=message())
    ref, thread_id = held_record(served, gate, run["run_id"])
    gate.release.set()
    wait_until_sync(lambda: run["run_id"] not in served.runs.runs, what="the run is forgotten")
    assert thread_id not in served.runs.threads
    wait_until_sync(lambda: ref() is None, what="the run's record is freed")
    # What a client asking for it later gets: a 404 that says why.
    answer = httpx.get(f"{served.url}/threads/{thread_id}/runs/{run['run_id']}")
    assert answer.status_code == 404
    assert "forgotten" in answer.json()["detail"]


def test_a_finished_run_of_a_thread_is_freed_after_the_retention_period(
    serve: Callable[..., Served], no_collector: None
) -> None:
    gate = Gate()
    served = serve(create_app({"agent": gated_agent(gate)}, run_retention=0.2))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "agent", input=message())
    ref, _ = held_record(served, gate, run["run_id"])
    gate.release.set()
    # Joined while it is kept: its own values.
    joined = client.runs.join(thread_id, run["run_id"])
    assert joined["messages"][-1]["content"] == "a" * BIG
    wait_until_sync(lambda: run["run_id"] not in served.runs.runs, what="the run is forgotten")
    thread = served.runs.threads[thread_id]
    assert thread.runs == []
    assert run["run_id"] in thread.forgotten
    wait_until_sync(lambda: ref() is None, what="the run's record is freed")
    del thread
    # What is left of it still answers: its record, and its thread's values.
    again = client.runs.get(thread_id, run["run_id"])
    assert (again["run_id"], again["status"]) == (run["run_id"], "success")
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [run["run_id"]]
    joined = client.runs.join(thread_id, run["run_id"])
    assert joined["messages"][-1]["content"] == "a" * BIG


def test_runs_are_read_from_the_database_once_let_go_of(
    serve: Callable[..., Served], tmp_path: Path, no_collector: None
) -> None:
    saver = SqliteCheckpointer(tmp_path / "threads.db")
    app = create_app(
        {"agent": big_agent()}, checkpointer=saver, run_retention=0.1, idle_timeout=0.1
    )
    served = serve(app)
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(thread_id, "agent", input=message("one"))
    assert isinstance(first, dict)
    run_id = client.runs.list(thread_id)[0]["run_id"]
    runtime = served.runs.runtime
    # The thread's values are read through its handle: its actor keeps what was
    # read until it leaves, idle (the server keeps no copy of its own).
    wait_until_sync(lambda: run_id not in served.runs.runs, what="the run is forgotten")
    wait_until_sync(
        lambda: runtime.statistics().actors == 0, what="the idle thread's actor leaves, with it"
    )
    # Read back from the checkpoint, through the thread's handle.
    got = client.threads.get(thread_id)
    assert got["values"]["messages"][-1]["content"] == "turn 1 " + "b" * BIG
    assert client.runs.get(thread_id, run_id)["status"] == "success"
    # A second run on the thread, then the first joined: the thread's values now
    # (as LangGraph's join answers), read from the database once let go of.
    client.runs.wait(thread_id, "agent", input=message("two"))
    wait_until_sync(
        lambda: not served.runs.runs and runtime.statistics().actors == 0,
        what="the second run is forgotten too, and the thread's actor gone",
    )
    joined = client.runs.join(thread_id, run_id)
    assert joined["messages"][-1]["content"] == "turn 3 " + "b" * BIG
    assert [r["status"] for r in client.runs.list(thread_id)] == ["success", "success"]
    assert client.threads.get_state(thread_id)["values"]["messages"][0]["content"] == "one"
    # Found by a search while idle: with its values, read back too.
    wait_until_sync(
        lambda: runtime.statistics().actors == 0, what="the idle thread's actor leaves again"
    )
    (found,) = client.threads.search()
    assert found["values"]["messages"][-1]["content"] == "turn 3 " + "b" * BIG


def test_serve_options_set_the_retention(serve: Callable[..., Served]) -> None:
    options = ServeOptions(run_retention=5.0, idle_timeout=7.0)
    served = serve(build_app(options))
    assert served.runs.retention.run_retention == 5.0
    assert served.runs.runtime.idle_timeout == 7.0


def test_a_bad_retention_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="run_retention"):
        create_app({"agent": big_agent()}, run_retention=float("nan"))


@pytest.mark.parametrize("stateless", [True, False], ids=["stateless", "thread"])
def test_a_failed_run_is_freed_too(
    serve: Callable[..., Served], no_collector: None, stateless: bool
) -> None:
    # Its error's traceback holds the frames of the run, which held its record.
    gate = Gate()
    served = serve(create_app({"agent": failing_agent(gate)}, run_retention=0.1))
    client = served.client()
    thread_id = None if stateless else client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "agent", input=message())
    ref, _ = held_record(served, gate, run["run_id"])
    gate.release.set()
    wait_until_sync(lambda: run["run_id"] not in served.runs.runs, what="the run is forgotten")
    wait_until_sync(lambda: ref() is None, what="the run's record is freed")
    if thread_id is not None:
        assert client.runs.get(thread_id, run["run_id"])["status"] == "error"
        joined = client.runs.join(thread_id, run["run_id"])
        assert "the model broke" in joined["__error__"]["message"]


def test_shared_runs_are_read_from_the_runs_database_once_let_go_of(
    serve: Callable[..., Served], tmp_path: Path, postgres_dsn: str
) -> None:
    app = create_app(
        {"agent": big_agent()},
        checkpointer=SqliteCheckpointer(tmp_path / "threads.db"),
        runs_db=postgres_dsn,
        run_retention=0.1,
    )
    served = serve(app)
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=message("one"))
    (run,) = client.runs.list(thread_id)
    wait_until_sync(lambda: run["run_id"] not in served.runs.runs, what="the run is forgotten")
    assert served.runs.threads[thread_id].forgotten == {}  # the database has it whole
    # Read from the runs database: its record and its own result, listed once.
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
    joined = client.runs.join(thread_id, run["run_id"])
    assert joined["messages"][-1]["content"] == "turn 1 " + "b" * BIG
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [run["run_id"]]


def test_threads_saved_before_a_restart_answer_with_their_values(
    serve: Callable[..., Served], tmp_path: Path
) -> None:
    def app() -> Any:
        return create_app(
            {"agent": big_agent()}, checkpointer=SqliteCheckpointer(tmp_path / "threads.db")
        )

    first = serve(app())
    client = first.client()
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=message("one"))
    first.stop()
    again = serve(app())
    assert again.runs.runtime.statistics().actors == 0  # nothing read at start-up
    got = again.client().threads.get(thread_id)
    assert got["values"]["messages"][-1]["content"] == "turn 1 " + "b" * BIG

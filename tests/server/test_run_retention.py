"""The server lets go of finished runs: no cycle, a retention period, idle threads' values.

Each test runs a real server (uvicorn on asyncio, hypercorn on trio) and looks
at its run manager from the test's thread. Whether a record is freed is checked
with the cyclic collector disabled: reference counting alone must free it
(``deepactors serve`` defers and freezes collections, so a cycle would stay).
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.server import create_app

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


def until(condition: Callable[[], object], what: str) -> None:
    """Poll the server's state from the test's thread until ``condition`` holds."""
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


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
    until(lambda: run["run_id"] not in served.runs.runs, "the run is forgotten")
    assert thread_id not in served.runs.threads
    until(lambda: ref() is None, "the run's record is freed")

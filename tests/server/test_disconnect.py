"""A client that leaves cancels its run's subtree; a server that stops cancels every run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from deepactors.server import create_app
from tests.waiting import wait_until_sync

from .agents import Probe, blocking_agent, fan_out_agent
from .conftest import Served

Serve = Callable[..., Served]


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_a_client_that_disconnects_cancels_the_run_at_once(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    stream = client.runs.stream(thread_id, "echo", input=say("wait"), stream_mode="custom")
    run_id = next(stream).data["run_id"]
    assert next(stream).data == {"waiting": True}  # the tool is blocked now
    calls = probe.calls
    left = time.time()
    stream.close()  # the client goes away mid-run
    run = served.runs.runs[run_id]
    wait_until_sync(lambda: run.done.is_set())
    assert run.finished_at is not None
    assert run.finished_at - left < 0.1  # cancelled within 100 ms of the disconnect
    assert run.status == "interrupted"
    assert probe.calls == calls  # no model call started afterwards
    assert probe.active == 0  # nothing of the run is left running
    assert served.runs.runtime.statistics().running == 0
    # The thread keeps a clean prefix: the question and the call that was cut off.
    state = client.threads.get_state(thread_id)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]
    assert client.runs.wait(thread_id, "echo", input=say("hello"))["messages"][-1]["content"] == (
        "echo: hello"
    )


def test_a_fan_out_is_cancelled_whole(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"research": fan_out_agent(probe)}))
    client = served.client()
    stream = client.runs.stream(
        None, "research", input=say("go"), stream_mode="custom", stream_subgraphs=True
    )
    run_id = next(stream).data["run_id"]
    seen = {next(stream).data["topic"], next(stream).data["topic"]}
    assert seen == {"alpha", "beta"}  # both subagents are inside their tool
    stream.close()
    run = served.runs.runs.get(run_id)
    if run is not None:
        wait_until_sync(lambda: run.done.is_set())
    wait_until_sync(lambda: served.runs.runtime.statistics().running == 0)
    assert probe.calls == 1  # the main agent never got to its second call
    assert served.runs.threads == {}  # the stateless run's thread is gone


def test_on_disconnect_continue_keeps_the_run(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    stream = client.runs.stream(
        thread_id, "echo", input=say("wait"), stream_mode="custom", on_disconnect="continue"
    )
    run_id = next(stream).data["run_id"]
    next(stream)
    stream.close()
    probe.release.set()
    assert client.runs.join(thread_id, run_id)["messages"][-1]["content"] == "echo: wait"
    assert client.runs.get(thread_id, run_id)["status"] == "success"


def test_shutdown_cancels_every_run_and_waits(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    client = served.client()
    runs = []
    for _ in range(3):
        thread_id = client.threads.create()["thread_id"]
        runs.append(client.runs.create(thread_id, "echo", input=say("wait"))["run_id"])
    wait_until_sync(lambda: probe.active == 3)
    manager = served.runs
    served.stop()
    assert [manager.runs[r].status for r in runs] == ["interrupted"] * 3
    assert probe.active == 0
    assert manager.runtime.statistics().running == 0

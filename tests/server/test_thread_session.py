"""client.threads.stream (LangGraph's v3 thread session) through the real langgraph-sdk.

Each test deletes its thread at the end: that ends the session's event streams
(the SDK's lifecycle watcher reads its stream until the server ends it), so the
server stops at once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import SyncLangGraphClient

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app
from deepactors.server.auth import api_keys
from deepactors.server.v3._session import EventFilter
from tests.waiting import wait_until_sync

from .conftest import Served

Serve = Callable[..., Served]


async def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


def one_tool_then_answer(request: ModelRequest) -> AssistantMessage:
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if not results:
        return AssistantMessage(tool_calls=[ToolCall(id="c1", name="shout", args={"text": "hi"})])
    return AssistantMessage(content=f"done: {results[-1].text}")


def app(**options: Any) -> Any:
    agent = create_deep_agent(
        FunctionModel(one_tool_then_answer),
        tools=[shout],
        checkpointer=MemoryCheckpointer(),
        **options,
    )
    return create_app({"agent": agent})


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def contents(values: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


@contextmanager
def session(client: SyncLangGraphClient, **options: Any) -> Iterator[Any]:
    """A thread session; its thread deleted after (which ends its streams)."""
    with client.threads.stream(assistant_id="agent", **options) as thread:
        try:
            yield thread
        finally:
            thread_id = thread.thread_id
    with contextlib.suppress(httpx.HTTPStatusError):  # never made (a refused run)
        client.threads.delete(thread_id)


def test_a_run_started_in_a_session_gives_the_output_runs_wait_gives(serve: Serve) -> None:
    client = serve(app()).client()
    with session(client) as thread:
        started = thread.run.start(input=say("go"))
        assert isinstance(started["run_id"], str)
        output = thread.output
        assert client.runs.get(thread.thread_id, started["run_id"])["status"] == "success"
    other = client.threads.create()["thread_id"]
    waited = client.runs.wait(other, "agent", input=say("go"))
    assert isinstance(waited, dict)
    assert contents(output) == contents(waited)
    assert contents(output)[-1] == ("ai", "done: HI")
    client.threads.delete(other)


def test_the_projections_see_the_runs_values_messages_and_tool_calls(serve: Serve) -> None:
    client = serve(app()).client()
    with session(client) as thread:
        thread.run.start(input=say("go"))
        seen = list(thread.interleave_projections(["values", "messages", "tool_calls"]))
        values = [item for name, item in seen if name == "values"]
        messages = [item for name, item in seen if name == "messages"]
        calls = [item for name, item in seen if name == "tool_calls"]
        # The state after each step: the input, the call, its result, the answer.
        assert contents(values[-1])[-1] == ("ai", "done: HI")
        assert [len(v["messages"]) for v in values] == [1, 2, 3, 4]
        # The model's two messages and the tool's result, in the content-block shape.
        assert len(messages) == 3
        call, result, answer = (m.output for m in messages)
        assert [(c["name"], c["args"]) for c in call.tool_calls] == [("shout", {"text": "hi"})]
        assert (result.text, answer.text) == ("HI", "done: HI")
        # The tool call, started and finished.
        assert [(c.name, c.input, c.output) for c in calls] == [("shout", {"text": "hi"}, "HI")]


def test_an_interrupt_shows_and_run_respond_resumes_it(serve: Serve) -> None:
    client = serve(app(interrupt_on={"shout": True})).client()
    with session(client) as thread:
        thread.run.start(input=say("go"))
        wait_until_sync(lambda: thread.interrupts, what="the interrupt shown", timeout=30)
        (pending,) = thread.interrupts
        assert pending["namespace"] == []
        requests = pending["value"]["action_requests"]
        assert [(r["name"], r["args"]) for r in requests] == [("shout", {"text": "hi"})]
        thread.run.respond({"decisions": [{"type": "approve"}]})
        assert contents(thread.output)[-1] == ("ai", "done: HI")
        assert thread.interrupts == []


def raw_command(served: Served, thread_id: str, body: Any) -> httpx.Response:
    return httpx.post(f"{served.url}/threads/{thread_id}/commands", json=body, timeout=30)


def test_unknown_unsupported_and_bad_commands_get_the_protocols_error(serve: Serve) -> None:
    served = serve(app())
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    unknown = raw_command(served, thread_id, {"id": 1, "method": "run.fly", "params": {}})
    assert unknown.status_code == 200
    assert unknown.json()["type"] == "error"
    assert (unknown.json()["id"], unknown.json()["error"]) == (1, "unknown_command")
    fork = raw_command(served, thread_id, {"id": 2, "method": "state.fork", "params": {}})
    assert fork.json()["error"] == "not_supported"
    bad = raw_command(served, thread_id, {"method": "run.start"})
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_argument")
    nobody = {"id": 3, "method": "run.start", "params": {"assistant_id": "nobody", "input": {}}}
    assert raw_command(served, thread_id, nobody).json()["error"] == "invalid_argument"
    respond = {"id": 4, "method": "input.respond", "params": {"interrupt_id": "x", "response": 1}}
    assert raw_command(served, thread_id, respond).json()["error"] == "no_such_interrupt"
    nan = httpx.post(
        f"{served.url}/threads/{thread_id}/commands",
        content=b'{"id": 6, "method": "run.start", "params": {"assistant_id": "agent",'
        b' "input": {"messages": [{"role": "user", "content": "x"}], "n": NaN}}}',
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert nan.status_code == 422  # JSON has no NaN: refused before anything runs
    assert "NaN" in nan.text
    state = raw_command(served, thread_id, {"id": 5, "method": "state.get", "params": {}})
    assert state.json() == {"type": "success", "id": 5, "result": {"values": {}}}
    events = httpx.post(
        f"{served.url}/threads/{thread_id}/stream/events", json={"channels": ["nope"]}, timeout=30
    )
    assert events.status_code == 400
    assert "channels" in events.json()["detail"]
    with (
        session(client, thread_id=thread_id) as thread,
        pytest.raises(RuntimeError, match=r"unknown command 'run\.fly'"),
    ):
        thread._send_command("run.fly", {})


def test_state_and_checkpoints_of_a_session(serve: Serve) -> None:
    served = serve(app())
    client = served.client()
    with session(client) as thread:
        thread.run.start(input=say("go"))
        assert thread.output["messages"]
        got = raw_command(served, thread.thread_id, {"id": 1, "method": "state.get", "params": {}})
        result = got.json()["result"]
        assert contents(result["values"])[-1] == ("ai", "done: HI")
        listed = {"id": 2, "method": "state.listCheckpoints", "params": {"limit": 2}}
        checkpoints = raw_command(served, thread.thread_id, listed).json()["result"]["checkpoints"]
        assert len(checkpoints) == 2
        assert checkpoints[0]["id"] == result["checkpoint"]["id"]
        tree = raw_command(served, thread.thread_id, {"id": 3, "method": "agent.getTree"})
        root = tree.json()["result"]["tree"]
        assert (root["namespace"], root["status"], root["graph_name"]) == ([], "completed", "agent")


ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"


def test_another_users_thread_is_not_found(serve: Serve) -> None:
    agent = create_deep_agent(
        FunctionModel(one_tool_then_answer), tools=[shout], checkpointer=MemoryCheckpointer()
    )
    served = serve(create_app({"agent": agent}, auth=api_keys({ALICE: "alice", BOB: "bob"})))
    alice = served.client(api_key=ALICE)
    with session(alice) as thread:
        thread.run.start(input=say("go"))
        assert thread.output["messages"]
        alices = thread.thread_id
        headers = {"x-api-key": BOB}
        events = httpx.post(
            f"{served.url}/threads/{alices}/stream/events",
            json={"channels": ["values"]},
            headers=headers,
            timeout=30,
        )
        assert events.status_code == 404
        got = httpx.post(
            f"{served.url}/threads/{alices}/commands",
            json={"id": 1, "method": "state.get", "params": {}},
            headers=headers,
            timeout=30,
        )
        assert got.status_code == 404


def test_the_websocket_transport_is_refused_saying_why(serve: Serve) -> None:
    client = serve(app()).client()
    with client.threads.stream(assistant_id="agent", transport="websocket") as thread:
        thread.run.start(input=say("go"))
        # The lifecycle stream is refused: the output says why.
        with pytest.raises(RuntimeError, match=r"WebSocket transport is not served"):
            thread.output  # noqa: B018


def read_events(served: Served, thread_id: str, body: dict[str, Any], until: str) -> list[Any]:
    """The events of a stream opened with ``body``, up to the first of method ``until``."""
    out: list[Any] = []
    url = f"{served.url}/threads/{thread_id}/stream/events"
    with httpx.stream("POST", url, json=body, timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
                if out[-1]["method"] == until:
                    return out
    raise AssertionError(f"the stream ended before a {until!r} event: {out}")


def test_a_stream_replays_after_since_and_filters_by_channel_and_namespace(serve: Serve) -> None:
    served = serve(app())
    client = served.client()
    with session(client) as thread:
        thread.run.start(input=say("go"))
        assert thread.output["messages"]
        tid = thread.thread_id
        every = read_events(served, tid, {"channels": ["lifecycle", "tools"]}, "tools")
        first, started = every[0], every[1]
        assert first["params"]["data"]["event"] == "running"
        assert started["params"]["data"]["event"] == "tool-started"
        # Numbered in order; since: only what came after.
        assert started["seq"] > first["seq"]
        after = read_events(
            served, tid, {"channels": ["lifecycle", "tools"], "since": started["seq"]}, "tools"
        )
        assert after[0]["seq"] > started["seq"]
        assert after[0]["params"]["data"]["event"] == "tool-finished"
        bad = {"channels": ["values"], "since": -1}
        url = f"{served.url}/threads/{tid}/stream/events"
        assert httpx.post(url, json=bad, timeout=30).status_code == 400


def event(method: str, namespace: list[str], data: Any = None) -> dict[str, Any]:
    return {"method": method, "params": {"namespace": namespace, "data": data or {}}}


def test_a_filter_takes_channels_namespace_prefixes_and_a_depth() -> None:
    wanted = EventFilter(frozenset({"lifecycle", "input", "custom:progress"}), (("a",),), 1)
    assert not wanted.matches(event("lifecycle", []))
    assert wanted.matches(event("lifecycle", ["a"]))
    assert wanted.matches(event("input.requested", ["a", "b"]))
    assert not wanted.matches(event("lifecycle", ["a", "b", "c"]))  # past the depth
    assert not wanted.matches(event("values", ["a"]))
    assert wanted.matches(event("custom", ["a"], {"name": "progress"}))
    assert not wanted.matches(event("custom", ["a"], {"payload": 1}))
    assert EventFilter(frozenset({"values"})).matches(event("values", ["x", "y"]))


def test_event_streams_count_among_a_clients_streams(serve: Serve) -> None:
    agent = create_deep_agent(FunctionModel(one_tool_then_answer), tools=[shout])
    served = serve(create_app({"agent": agent}, max_streams_per_client=1))
    thread_id = served.client().threads.create()["thread_id"]
    url = f"{served.url}/threads/{thread_id}/stream/events"
    with httpx.stream("POST", url, json={"channels": ["values"]}, timeout=30) as first:
        assert first.status_code == 200
        second = httpx.post(url, json={"channels": ["values"]}, timeout=30)
        assert second.status_code == 429
    served.client().threads.delete(thread_id)

"""The Agent Protocol through the real langgraph-sdk clients, on uvicorn and hypercorn+trio."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from deepactors.persistence import MemoryCheckpointer, MemoryStore
from deepactors.server import create_app

from .agents import Probe, blocking_agent, fan_out_agent
from .conftest import Served

Serve = Callable[..., Served]
USER = {"messages": [{"role": "user", "content": "go"}]}


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_assistants_are_the_served_agents(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"research": fan_out_agent(probe), "echo": blocking_agent(probe)}))
    client = served.client()
    found = client.assistants.search()
    assert sorted(a["graph_id"] for a in found) == ["echo", "research"]
    by_name = client.assistants.get("research")
    assert client.assistants.get(by_name["assistant_id"])["graph_id"] == "research"
    schemas = client.assistants.get_schemas("research")
    assert "messages" in schemas["input_schema"]["properties"]
    assert "todos" in schemas["output_schema"]["properties"]
    with pytest.raises(NotFoundError):
        client.assistants.get("nobody")


def test_threads_create_get_search_patch_delete(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    client = served.client()
    made = client.threads.create(metadata={"user": "ana"})
    named = client.threads.create(thread_id="my-thread", metadata={"user": "bo"})
    assert named["thread_id"] == "my-thread"
    assert named["status"] == "idle"
    with pytest.raises(ConflictError):
        client.threads.create(thread_id="my-thread")
    again = client.threads.create(thread_id="my-thread", if_exists="do_nothing")
    assert again["metadata"] == {"user": "bo"}
    assert [t["thread_id"] for t in client.threads.search(metadata={"user": "ana"})] == [
        made["thread_id"]
    ]
    assert client.threads.count() == 2
    client.threads.update("my-thread", metadata={"team": "x"})
    assert client.threads.get("my-thread")["metadata"] == {"user": "bo", "team": "x"}
    client.threads.delete("my-thread")
    with pytest.raises(NotFoundError):
        client.threads.get("my-thread")


def test_stream_shows_subagent_events_while_they_work(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"research": fan_out_agent(probe)}))
    client = served.client()
    thread = client.threads.create()
    events: list[tuple[str, Any]] = []
    for part in client.runs.stream(
        thread["thread_id"],
        "research",
        input=USER,
        stream_mode=["values", "updates", "messages-tuple", "custom"],
        stream_subgraphs=True,
    ):
        events.append((part.event, part.data))
        if part.event.startswith("custom|"):
            # The subagents wait for this: the event reached us while they ran.
            probe.seen.set()
    names = [e for e, _ in events]
    assert names[0] == "metadata"
    child_custom = [d for e, d in events if e.startswith("custom|task-")]
    assert sorted(d["topic"] for d in child_custom) == ["alpha", "beta"]
    assert any(e.startswith("values|task-") for e in names)
    assert any(e.startswith("messages|task-") for e in names)
    final = [d for e, d in events if e == "values"][-1]
    assert final["messages"][-1]["content"] == "report: finding on alpha; finding on beta"
    assert [m["type"] for m in final["messages"]] == ["human", "ai", "tool", "tool", "ai"]
    runs = client.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success"]


def test_wait_then_state_and_history(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(thread_id, "echo", input=say("one"))
    assert first["messages"][-1]["content"] == "echo: one"
    client.runs.wait(thread_id, "echo", input=say("two"))
    state = client.threads.get_state(thread_id)
    assert [m["content"] for m in state["values"]["messages"]] == [
        "one",
        "echo: one",
        "two",
        "echo: two",
    ]
    assert state["next"] == []
    assert state["checkpoint"]["thread_id"] == thread_id
    history = client.threads.get_history(thread_id, limit=10)
    assert history[0]["checkpoint"] == state["checkpoint"]
    oldest = history[-1]
    assert [m["content"] for m in oldest["values"]["messages"]] == ["one"]
    past = client.threads.get_state(thread_id, checkpoint_id=oldest["checkpoint"]["checkpoint_id"])
    assert past["values"] == oldest["values"]
    assert client.threads.get(thread_id)["values"]["messages"][-1]["content"] == "echo: two"


def test_interrupt_then_resume_with_deepagents_decisions(serve: Serve) -> None:
    probe = Probe()
    agent = blocking_agent(probe, interrupt_on={"wait": True}, checkpointer=MemoryCheckpointer())
    served = serve(create_app({"echo": agent}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    stopped = client.runs.wait(thread_id, "echo", input=say("please wait"))
    (interrupt,) = stopped["__interrupt__"]
    assert interrupt["value"]["action_requests"][0]["name"] == "wait"
    assert interrupt["value"]["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
        "respond",
    ]
    assert client.threads.get(thread_id)["status"] == "interrupted"
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["tools"]
    assert state["tasks"][0]["interrupts"] == [interrupt]
    resumed = client.runs.wait(
        thread_id,
        "echo",
        command={"resume": {"decisions": [{"type": "respond", "message": "skip it"}]}},
    )
    assert resumed["messages"][-2]["content"] == "skip it"
    assert resumed["messages"][-1]["content"] == "echo: please wait"
    assert client.threads.get(thread_id)["status"] == "idle"
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(thread_id, "echo", command={"resume": [{"type": "approve"}]})
    assert refused.value.response.status_code == 422
    assert "not waiting" in refused.value.response.json()["detail"]


def test_cancel_a_background_run_and_wait(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "echo", input=say("wait here"))
    assert probe.blocked.wait(5)  # the tool is blocked
    calls = probe.calls
    client.runs.cancel(thread_id, run["run_id"], wait=True)
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
    assert probe.active == 0
    assert probe.calls == calls
    assert served.runs.runtime.statistics().running == 0


def test_join_and_join_stream(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "echo", input=say("wait"), stream_mode="updates")
    assert probe.blocked.wait(5)
    joined_stream = client.runs.join_stream(thread_id, run["run_id"])
    assert next(joined_stream).event == "metadata"  # subscribed from here on
    probe.release.set()
    parts = list(joined_stream)
    assert any(p.event == "updates" for p in parts)
    joined = client.runs.join(thread_id, run["run_id"])
    assert joined["messages"][-1]["content"] == "echo: wait"


def test_multitask_strategies_on_a_busy_thread(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    busy = client.runs.create(thread_id, "echo", input=say("wait 1"))
    assert probe.blocked.wait(5)

    with pytest.raises(ConflictError):
        client.runs.create(thread_id, "echo", input=say("no"), multitask_strategy="reject")

    queued = client.runs.create(
        thread_id, "echo", input=say("queued"), multitask_strategy="enqueue"
    )
    assert client.runs.get(thread_id, queued["run_id"])["status"] == "pending"
    probe.release.set()
    assert (
        client.runs.join(thread_id, queued["run_id"])["messages"][-1]["content"] == "echo: queued"
    )
    assert client.runs.get(thread_id, busy["run_id"])["status"] == "success"

    probe.release.clear()
    second = client.runs.create(thread_id, "echo", input=say("wait 2"))
    assert probe.blocked.wait(5)
    taking_over = client.runs.wait(
        thread_id, "echo", input=say("interrupting"), multitask_strategy="interrupt"
    )
    assert client.runs.get(thread_id, second["run_id"])["status"] == "interrupted"
    contents = [m["content"] for m in taking_over["messages"]]
    assert "wait 2" in contents  # interrupt keeps what the cancelled run did
    assert contents[-1] == "echo: interrupting"

    third = client.runs.create(thread_id, "echo", input=say("wait 3"))
    assert probe.blocked.wait(5)
    rolled = client.runs.wait(thread_id, "echo", input=say("rolled"), multitask_strategy="rollback")
    contents = [m["content"] for m in rolled["messages"]]
    assert "wait 3" not in contents  # rollback undoes the cancelled run
    assert contents[-2:] == ["rolled", "echo: rolled"]
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, third["run_id"])
    assert probe.active == 0


def test_stateless_runs_leave_no_thread(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    client = served.client()
    result = client.runs.wait(None, "echo", input=say("hi"))
    assert result["messages"][-1]["content"] == "echo: hi"
    parts = list(client.runs.stream(None, "echo", input=say("yo"), stream_mode="values"))
    assert parts[-1].data["messages"][-1]["content"] == "echo: yo"
    assert client.threads.search() == []


def test_update_state_then_run_sees_it(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    client = served.client()
    thread_id = client.threads.create(metadata={"graph_id": "echo"})["thread_id"]
    client.threads.update_state(thread_id, {"files": {"/a.md": "hello"}})
    state = client.threads.get_state(thread_id)
    assert state["values"]["files"]["/a.md"]["content"] == "hello"
    client.runs.wait(thread_id, "echo", input=say("x"))
    assert client.threads.get_state(thread_id)["values"]["files"]["/a.md"]["content"] == "hello"
    # A client may set what only tools write in a run, as with LangGraph (issue 27).
    client.threads.update_state(thread_id, {"todos": [{"content": "a", "status": "pending"}]})
    assert client.threads.get_state(thread_id)["values"]["todos"][0]["content"] == "a"


def test_store_items(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}, store=MemoryStore()))
    client = served.client()
    client.store.put_item(["memories", "ana"], "likes", {"food": "pho"})
    client.store.put_item(["memories", "bo"], "likes", {"food": "taco"})
    item = client.store.get_item(["memories", "ana"], "likes")
    assert item["value"] == {"food": "pho"}
    found = client.store.search_items(["memories"], filter={"food": "taco"})
    assert [i["namespace"] for i in found["items"]] == [["memories", "bo"]]
    namespaces = client.store.list_namespaces(prefix=["memories"])["namespaces"]
    assert namespaces == [["memories", "ana"], ["memories", "bo"]]
    client.store.delete_item(["memories", "ana"], "likes")
    assert client.store.get_item(["memories", "ana"], "likes") is None


def test_async_client_streams_and_waits(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))

    async def main() -> None:
        async with get_client(url=served.url) as client:
            await _async_body(client)

    async def _async_body(client: Any) -> None:
        thread = await client.threads.create()
        parts = [
            p
            async for p in client.runs.stream(
                thread["thread_id"], "echo", input=say("hi"), stream_mode="messages-tuple"
            )
        ]
        chunks = [p.data[0] for p in parts if p.event == "messages"]
        assert "".join(c["content"] for c in chunks) == "echo: hi"
        result = await client.runs.wait(thread["thread_id"], "echo", input=say("again"))
        assert result["messages"][-1]["content"] == "echo: again"

    asyncio.run(main())


def test_bad_requests_get_clear_errors_never_500(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    thread_id = served.client().threads.create()["thread_id"]
    cases: list[tuple[str, str, Any, int, str]] = [
        ("POST", "/threads", b"{not json", 422, "not valid JSON"),
        ("POST", "/threads", b"[1, 2]", 422, "JSON object"),
        ("POST", "/runs/wait", {"input": USER}, 422, "assistant_id"),
        ("POST", "/runs/wait", {"assistant_id": "nobody", "input": USER}, 404, "nobody"),
        (
            "POST",
            "/runs/stream",
            {"assistant_id": "echo", "stream_mode": "tokens"},
            422,
            "stream_mode",
        ),
        (
            "POST",
            "/runs/wait",
            {"assistant_id": "echo", "input": {"messages": [{"role": "x"}]}},
            422,
            "input",
        ),
        ("POST", "/runs/wait", {"assistant_id": "echo", "input": {"todos": []}}, 422, "todos"),
        ("POST", "/runs/wait", {"assistant_id": "echo", "webhook": "ftp://x"}, 422, "webhook"),
        (
            "POST",
            f"/threads/{thread_id}/runs",
            {"assistant_id": "echo", "multitask_strategy": "x"},
            422,
            "multitask_strategy",
        ),
        ("POST", "/threads/nope/runs/wait", {"assistant_id": "echo", "input": USER}, 404, "nope"),
        ("GET", f"/threads/{thread_id}/state/abc", None, 422, "checkpoint_id"),
        ("POST", f"/threads/{thread_id}/history", {"limit": 0}, 422, "limit"),
        (
            "POST",
            "/runs/wait",
            {"assistant_id": "echo", "input": USER, "config": {"recursion_limit": "x"}},
            422,
            "recursion_limit",
        ),
    ]
    with httpx.Client(base_url=served.url) as http:
        for method, path, body, status, words in cases:
            content = body if isinstance(body, bytes) else None
            response = http.request(method, path, content=content, json=None if content else body)
            assert response.status_code == status, (path, body, response.text)
            assert words in response.json()["detail"], (path, response.json())


def test_a_plain_app_has_a_store_in_memory(serve: Serve) -> None:
    # As `langgraph dev` has: every store call of the SDK answers without a store= given.
    client = serve(create_app({"echo": blocking_agent(Probe())})).client()
    client.store.put_item(["notes", "a"], "k", {"text": "hi"})
    assert client.store.get_item(["notes", "a"], "k")["value"] == {"text": "hi"}
    assert [i["key"] for i in client.store.search_items(["notes"])["items"]] == ["k"]
    assert client.store.list_namespaces(prefix=["notes"])["namespaces"] == [["notes", "a"]]
    client.store.delete_item(["notes", "a"], "k")
    assert client.store.get_item(["notes", "a"], "k") is None

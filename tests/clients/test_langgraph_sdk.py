"""The Python ``langgraph-sdk`` as deep-agents-ui and Agent Chat UI drive the server:
runs on a thread with its head checkpoint, forks from an older one, decisions."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient


@pytest.fixture
def client(url: str) -> Any:
    with get_sync_client(url=url) as client:
        yield client


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _last(values: dict[str, Any]) -> str:
    content: str = values["messages"][-1]["content"]
    return content


def _head(client: SyncLangGraphClient, thread_id: str) -> dict[str, Any]:
    """The head's checkpoint as useStream sends it: from /history, without thread_id."""
    head = client.threads.get_history(thread_id, limit=1)[0]["checkpoint"]
    return {k: v for k, v in head.items() if k != "thread_id"}


def test_follow_up_with_the_head_checkpoint_continues_the_thread(
    client: SyncLangGraphClient,
) -> None:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("one"))
    values = client.runs.wait(
        thread_id, "agent", input=_say("two"), checkpoint=_head(client, thread_id)
    )
    assert _last(values) == "echo #2: two"
    # checkpoint_id alone, as older clients send it.
    head = client.threads.get_state(thread_id)["checkpoint_id"]
    values = client.runs.wait(thread_id, "agent", input=_say("three"), checkpoint_id=head)
    assert _last(values) == "echo #3: three"


def test_an_older_checkpoint_forks_and_keeps_the_old_branch_in_history(
    client: SyncLangGraphClient,
) -> None:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("one"))
    first = _head(client, thread_id)
    client.runs.wait(thread_id, "agent", input=_say("two"))
    before_fork = [s["checkpoint_id"] for s in client.threads.get_history(thread_id, limit=100)]

    values = client.runs.wait(thread_id, "agent", input=_say("again"), checkpoint=first)
    assert _last(values) == "echo #2: again"
    assert [m["content"] for m in values["messages"]] == [
        "one",
        "echo #1: one",
        "again",
        "echo #2: again",
    ]
    history = client.threads.get_history(thread_id, limit=100)
    ids = [s["checkpoint_id"] for s in history]
    # The superseded branch is still there, and still readable as it was.
    assert set(before_fork) <= set(ids)
    old_head = client.threads.get_state(thread_id, checkpoint_id=before_fork[0])
    assert _last(old_head["values"]) == "echo #2: two"
    # The new branch hangs off the checkpoint it was forked from.
    by_id = {s["checkpoint_id"]: s for s in history}
    node = by_id[ids[0]]
    while node["parent_checkpoint"] is not None and node["checkpoint_id"] not in before_fork:
        node = by_id[node["parent_checkpoint"]["checkpoint_id"]]
    assert node["checkpoint_id"] == first["checkpoint_id"]
    assert client.threads.get_state(thread_id)["values"] == values


def test_an_unknown_or_malformed_checkpoint_is_refused_clearly(
    client: SyncLangGraphClient, url: str
) -> None:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("one"))
    with pytest.raises(httpx.HTTPStatusError) as unknown:
        client.runs.wait(thread_id, "agent", input=_say("x"), checkpoint={"checkpoint_id": "9999"})
    assert unknown.value.response.status_code == 404
    assert "has no checkpoint '9999'" in unknown.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as malformed:
        client.runs.wait(thread_id, "agent", input=_say("x"), checkpoint_id="not-an-id")
    assert malformed.value.response.status_code == 422
    answer = httpx.post(
        f"{url}/threads/{thread_id}/runs/wait",
        json={
            "assistant_id": "agent",
            "input": _say("x"),
            "checkpoint": {"checkpoint_id": "1", "checkpoint_ns": "tools:1"},
        },
    )
    assert answer.status_code == 422
    assert "checkpoint_ns" in answer.json()["detail"]
    # Nothing ran: the thread is as it was.
    assert _last(client.threads.get_state(thread_id)["values"]) == "echo #1: one"


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "approve"}, "sent: sent to bob: email bob"),
        ({"type": "reject", "message": "no"}, "not sent: "),
        (
            {
                "type": "edit",
                "edited_action": {"name": "send_email", "args": {"to": "al", "body": "hi"}},
            },
            "sent: sent to al: hi",
        ),
    ],
)
def test_decisions_resume_with_the_head_checkpoint_as_deep_agents_ui_sends_them(
    client: SyncLangGraphClient, decision: dict[str, Any], expected: str
) -> None:
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread_id, "agent", input=_say("email bob"), stream_mode=["values", "updates"]
        )
    )
    assert any(p.event == "updates" and "__interrupt__" in p.data for p in parts)
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["tools"]
    assert state["interrupts"]
    values = client.runs.wait(
        thread_id,
        "agent",
        command={"resume": {"decisions": [decision]}, "goto": [], "update": None, "graph": None},
        checkpoint=_head(client, thread_id),
    )
    assert _last(values).startswith(expected)
    assert client.threads.get_state(thread_id)["next"] == []


def test_update_state_from_an_older_checkpoint_forks_there(client: SyncLangGraphClient) -> None:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("one"))
    first = _head(client, thread_id)
    client.runs.wait(thread_id, "agent", input=_say("two"))
    answer = client.threads.update_state(
        thread_id, {"messages": [{"role": "user", "content": "edited"}]}, checkpoint=first
    )
    state = client.threads.get_state(thread_id)
    assert state["checkpoint"]["checkpoint_id"] == answer["checkpoint"]["checkpoint_id"]
    assert [m["content"] for m in state["values"]["messages"]] == ["one", "echo #1: one", "edited"]


def test_update_state_sets_todos_files_and_messages_with_their_reducers(
    client: SyncLangGraphClient,
) -> None:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("one"))
    todos = [{"content": "write the report", "status": "in_progress"}]
    client.threads.update_state(thread_id, {"todos": todos}, as_node="tools")
    client.threads.update_state(thread_id, {"files": {"/notes.md": "hi"}})
    client.threads.update_state(thread_id, {"messages": [{"role": "user", "content": "more"}]})
    values = client.threads.get_state(thread_id)["values"]
    assert [t["content"] for t in values["todos"]] == ["write the report"]
    assert "/notes.md" in values["files"]
    assert [m["content"] for m in values["messages"]] == ["one", "echo #1: one", "more"]


def test_agent_chat_ui_resume_and_regenerate(client: SyncLangGraphClient) -> None:
    # Agent Chat UI resumes with submit({}, {command}) and regenerates an answer
    # with submit(undefined, {checkpoint: <the answer's parent checkpoint>}).
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("email bob"))
    values = client.runs.wait(
        thread_id, "agent", input={}, command={"resume": {"decisions": [{"type": "approve"}]}}
    )
    assert _last(values) == "sent: sent to bob: email bob"
    client.runs.wait(thread_id, "agent", input=_say("hello"))
    history = client.threads.get_history(thread_id, limit=100)
    parent = next(s for s in history if s["values"]["messages"][-1]["content"] == "hello")[
        "checkpoint"
    ]
    values = client.runs.wait(thread_id, "agent", input=None, checkpoint=parent)
    assert [m["content"] for m in values["messages"][-2:]] == ["hello", "echo #2: hello"]


def test_agent_chat_ui_mark_as_resolved_ends_the_pending_work(
    client: SyncLangGraphClient, url: str
) -> None:
    # submit({}, {command: {goto: END}}): the pending call answered as not run,
    # no model call (the agent's model would have said "not sent: ..."), the
    # thread idle and ready for the next message.
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("email bob"))
    parts = list(
        client.runs.stream(
            thread_id,
            "agent",
            input={},
            command={"goto": "__end__"},
            stream_mode="values",
            checkpoint=_head(client, thread_id),
        )
    )
    last = [p.data for p in parts if p.event == "values"][-1]["messages"][-1]
    assert (last["type"], last["name"], last["status"]) == ("tool", "send_email", "error")
    assert last["content"].startswith("Not run:")
    thread = client.threads.get(thread_id)
    assert thread["status"] == "idle"
    assert client.threads.get_state(thread_id)["interrupts"] == []
    values = client.runs.wait(thread_id, "agent", input=_say("hello"))
    assert _last(values) == "echo #2: hello"
    # Nothing waits now; other targets are refused, naming the ones there are.
    with httpx.Client(base_url=url) as http:
        for command, why in [
            ({"goto": "__end__"}, "not waiting for any decision"),
            ({"goto": "agent"}, "'model' or 'tools'"),
            ({"goto": ["tools"]}, "no tool call waiting"),
            ({"goto": "__end__", "resume": {"decisions": []}}, "not both"),
        ]:
            refused = http.post(
                f"/threads/{thread_id}/runs/wait",
                json={"assistant_id": "agent", "command": command},
            )
            assert refused.status_code == 422, refused.text
            assert why in refused.json()["detail"]


def test_mark_as_resolved_leaves_the_thread_finished(client: SyncLangGraphClient) -> None:
    # What a thread whose run ended shows on LangGraph's server: nothing next,
    # no task, no interrupt, idle; its newest history entry the same. (LangGraph
    # itself reruns the interrupted node on goto __end__, asking again; here the
    # calls are answered as not run and the run ends, so it reads as ended.)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_say("email bob"))
    assert client.threads.get_state(thread_id)["next"] == ["tools"]
    ended = client.runs.wait(
        thread_id,
        "agent",
        input={},
        command={"goto": "__end__"},
        checkpoint=_head(client, thread_id),
    )
    state = client.threads.get_state(thread_id)
    assert (state["next"], state["tasks"], state["interrupts"]) == ([], [], [])
    assert state["values"] == ended
    assert client.threads.get_history(thread_id, limit=1)[0] == state
    thread = client.threads.get(thread_id)
    assert (thread["status"], thread["interrupts"], thread["values"]) == ("idle", {}, ended)
    # Continuing it runs nothing (as LangGraph's input None on a finished
    # thread): no model call, no new checkpoint.
    assert client.runs.wait(thread_id, "agent", input=None) == ended
    assert client.threads.get_state(thread_id) == state
    # The next message runs as on any finished thread.
    values = client.runs.wait(thread_id, "agent", input=_say("hello"))
    assert [m["content"] for m in values["messages"][-2:]] == ["hello", "echo #2: hello"]
    after = client.threads.get_state(thread_id)
    assert (after["next"], after["tasks"], after["interrupts"]) == ([], [], [])
    assert client.threads.get(thread_id)["status"] == "idle"

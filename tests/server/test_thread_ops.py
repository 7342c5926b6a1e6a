"""threads.copy and prune, runs.create_batch, assistants.set_latest through langgraph-sdk."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app
from deepactors.server.auth import api_keys

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]
KEY_A, KEY_B = "alice-key-0123456789", "bob-key-0123456789ab"


def say(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def app(**kwargs: object) -> object:
    return create_app(
        {"echo": blocking_agent(Probe(), checkpointer=MemoryCheckpointer())}, **kwargs
    )


def test_a_copy_has_the_state_and_history_and_goes_its_own_way(serve: Serve) -> None:
    client = serve(app()).client()
    source = client.threads.create(metadata={"topic": "x"})["thread_id"]
    client.runs.wait(source, "echo", input=say("one"))
    client.runs.wait(source, "echo", input=say("two"))
    copy = client.threads.copy(source)
    assert copy["thread_id"] != source
    assert copy["metadata"]["topic"] == "x"
    assert (
        client.threads.get_state(copy["thread_id"])["values"]
        == (client.threads.get_state(source)["values"])
    )
    history = client.threads.get_history(source, limit=100)
    copied = client.threads.get_history(copy["thread_id"], limit=100)
    assert [h["values"] for h in copied] == [h["values"] for h in history]
    client.runs.wait(copy["thread_id"], "echo", input=say("three"))
    assert len(client.threads.get_state(source)["values"]["messages"]) == 4
    assert len(client.threads.get_state(copy["thread_id"])["values"]["messages"]) == 6
    with pytest.raises(NotFoundError):
        client.threads.copy("no-such-thread")


def test_prune_deletes_the_named_threads_of_the_caller(serve: Serve) -> None:
    served = serve(app(auth=api_keys({KEY_A: "alice", KEY_B: "bob"})))
    with (
        get_sync_client(url=served.url, api_key=KEY_A) as alice,
        get_sync_client(url=served.url, api_key=KEY_B) as bob,
    ):
        mine = [alice.threads.create()["thread_id"] for _ in range(2)]
        theirs = bob.threads.create()["thread_id"]
        alice.runs.wait(mine[0], "echo", input=say("saved"))
        done = alice.threads.prune([*mine, theirs, "absent"])
        assert done == {"pruned_count": 2}
        for thread_id in mine:
            with pytest.raises(NotFoundError):
                alice.threads.get(thread_id)
        assert bob.threads.get(theirs)["thread_id"] == theirs  # another's: untouched
        assert alice.threads.prune([theirs], strategy="keep_latest") == {"pruned_count": 0}


def test_prune_keep_latest_keeps_a_threads_state_and_drops_its_history(serve: Serve) -> None:
    client = serve(app()).client()
    thread = client.threads.create()["thread_id"]
    other = client.threads.create()["thread_id"]
    for text in ("one", "two", "three"):
        client.runs.wait(thread, "echo", input=say(text))
        client.runs.wait(other, "echo", input=say(text))
    state = client.threads.get_state(thread)
    assert len(client.threads.get_history(thread, limit=100)) > 1
    done = client.threads.prune([thread, "absent"], strategy="keep_latest")
    assert done == {"pruned_count": 1}
    kept = client.threads.get_state(thread)
    assert (kept["values"], kept["next"]) == (state["values"], state["next"])
    assert [h["values"] for h in client.threads.get_history(thread, limit=100)] == [state["values"]]
    assert len(client.threads.get_history(other, limit=100)) > 1  # not named: untouched
    assert client.threads.get(thread)["status"] == "idle"
    client.runs.wait(thread, "echo", input=say("four"))
    said = [m["content"] for m in client.threads.get_state(thread)["values"]["messages"]]
    assert said[-2:] == ["four", "echo: four"]
    assert len(said) == 8


def test_a_batch_of_runs_is_checked_whole_then_started(serve: Serve) -> None:
    client = serve(app()).client()
    runs = client.runs.create_batch(
        [{"assistant_id": "echo", "input": say(f"n{i}"), "on_completion": "keep"} for i in range(3)]
    )
    assert len({r["run_id"] for r in runs}) == 3
    answers = {
        client.runs.join(r["thread_id"], r["run_id"])["messages"][-1]["content"] for r in runs
    }
    assert answers == {"echo: n0", "echo: n1", "echo: n2"}
    before = client.threads.count()
    with pytest.raises(UnprocessableEntityError) as refused:
        client.runs.create_batch(
            [{"assistant_id": "echo", "input": say("ok")}, {"assistant_id": "echo", "input": 3}]
        )
    assert "[1]" in refused.value.response.json()["detail"]
    assert client.threads.count() == before  # nothing of the batch started


def test_set_latest_knows_the_one_version(serve: Serve) -> None:
    client = serve(app()).client()
    assert client.assistants.set_latest("echo", 1)["graph_id"] == "echo"
    with pytest.raises(NotFoundError):
        client.assistants.set_latest("echo", 2)

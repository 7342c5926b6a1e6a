"""threads.join_stream (GET /threads/{id}/stream) through the real langgraph-sdk."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx

from deepactors import AssistantMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app
from tests.waiting import wait_until_sync

from .conftest import Served

Serve = Callable[..., Served]


def answer(request: ModelRequest) -> AssistantMessage:
    return AssistantMessage(content=f"answer {len(request.messages)}")


def app() -> Any:
    agent = create_deep_agent(FunctionModel(answer), checkpointer=MemoryCheckpointer())
    return create_app({"agent": agent})


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class Join:
    """A join of a thread's stream in a thread of its own, until ``runs`` runs ended."""

    def __init__(self, served: Served, thread_id: str, runs: int, **options: Any) -> None:
        self.parts: list[tuple[str, Any]] = []
        self._client = served.client()
        self._args = (thread_id, runs, options)
        self._worker = threading.Thread(target=self._follow, daemon=True)
        self._worker.start()
        watchers = served.app.state.runs.threads  # the join is registered once it shows here
        wait_until_sync(
            lambda: any(t.watchers for t in watchers.values()),
            what="the join reached the server",
            timeout=30,
        )

    def _follow(self) -> None:
        thread_id, runs, options = self._args
        ended = 0
        for part in self._client.threads.join_stream(thread_id, **options):
            self.parts.append((part.event, part.data))
            if part.event == "metadata" and part.data.get("status") == "run_done":
                ended += 1
                if ended == runs:
                    return

    def wait(self) -> list[tuple[str, Any]]:
        self._worker.join(30)
        assert not self._worker.is_alive(), f"the join is still waiting: {self.parts}"
        return self.parts


def test_a_join_follows_every_run_of_the_thread_in_the_runs_modes(serve: Serve) -> None:
    served = serve(app())
    client = served.client()
    thread = client.threads.create()["thread_id"]
    join = Join(served, thread, runs=2)
    first = client.runs.create(thread, "agent", input=say("one"), stream_mode="values")
    client.runs.join(thread, first["run_id"])
    second = client.runs.create(thread, "agent", input=say("two"), stream_mode="updates")
    client.runs.join(thread, second["run_id"])
    parts = join.wait()
    events = [event for event, _ in parts]
    # Each run's own stream, in its own modes, between its two metadata events.
    assert parts[0] == ("metadata", {"run_id": first["run_id"], "attempt": 1})
    done_first = events.index("metadata", 1)
    assert parts[done_first] == ("metadata", {"status": "run_done", "run_id": first["run_id"]})
    assert set(events[1:done_first]) == {"values"}
    assert parts[done_first - 1][1]["messages"][-1]["content"] == "answer 1"
    assert parts[done_first + 1] == ("metadata", {"run_id": second["run_id"], "attempt": 1})
    assert parts[-1] == ("metadata", {"status": "run_done", "run_id": second["run_id"]})
    assert set(events[done_first + 2 : -1]) == {"updates"}


def test_lifecycle_and_state_updates_only_what_they_name(serve: Serve) -> None:
    served = serve(app())
    client = served.client()
    thread = client.threads.create()["thread_id"]
    run = client.runs.wait(thread, "agent", input=say("one"))
    assert isinstance(run, dict)
    join = Join(served, thread, runs=1, stream_mode=["lifecycle", "state_update"])
    client.threads.update_state(thread, {"todos": [{"content": "x", "status": "pending"}]})
    later = client.runs.create(thread, "agent", input=say("two"))
    client.runs.join(thread, later["run_id"])
    parts = join.wait()
    assert [event for event, _ in parts] == ["state_update", "metadata", "metadata"]
    update = parts[0][1]
    assert update["thread_id"] == thread
    assert update["state"]["values"]["todos"] == [{"content": "x", "status": "pending"}]
    assert parts[1:] == [
        ("metadata", {"run_id": later["run_id"], "attempt": 1}),
        ("metadata", {"status": "run_done", "run_id": later["run_id"]}),
    ]


def test_a_bad_join_is_refused_and_an_unknown_thread_is_not_found(serve: Serve) -> None:
    served = serve(app())
    thread = served.client().threads.create()["thread_id"]
    with httpx.Client(base_url=served.url) as http:
        bad = http.get(f"/threads/{thread}/stream", params={"stream_mode": "values"})
        assert bad.status_code == 422
        assert "run_modes" in bad.json()["detail"]
        again = http.get(f"/threads/{thread}/stream", headers={"Last-Event-ID": "3"})
        assert again.status_code == 422
        assert "not resumable" in again.json()["detail"]
        missing = http.get("/threads/00000000-0000-4000-8000-000000000000/stream")
        assert missing.status_code == 404


def test_a_deleted_thread_ends_its_joins(serve: Serve) -> None:
    served = serve(app())
    client = served.client()
    thread = client.threads.create()["thread_id"]
    join = Join(served, thread, runs=1)
    client.threads.delete(thread)
    assert join.wait() == []

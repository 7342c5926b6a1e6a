"""Thread ids are each owner's own: another user's id answers as an absent one, on
create too.

``POST /threads {"thread_id": "tA"}`` by Bob, where ``tA`` is Alice's, answered
409: ids could be probed (who has which) and squatted (an id made first keeps
its owner out of it). Now Bob gets a thread ``tA`` of his own, exactly as if
Alice had none; every endpoint (runs, state, history, update, patch, delete,
search, join, stream, cancel) agrees on whose ``tA`` each one means, and a rule
that lets an administrator read every thread reaches the first owner's. On
uvicorn (asyncio) and hypercorn (trio), with the real ``langgraph-sdk``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from langgraph_sdk.client import SyncLangGraphClient

from deepactors import create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.server import create_app
from deepactors.server.auth import Identity, RuleContext, api_keys

from .conftest import Served

Serve = Callable[..., Served]
KEYS = {
    "alice-key-0123456789abcd": "alice",
    "bob-key-0123456789abcdef": "bob",
    "carol-key-0123456789abcd": "carol",
}
ROOT = "root-key-0123456789abcde"


def echo_agent(**kwargs: Any) -> Any:
    def model(request: ModelRequest) -> str:
        return "seen: " + " | ".join(m.text for m in request.messages if m.role == "user")

    return create_deep_agent(FunctionModel(model), name="agent", **kwargs)


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def status_of(call: Callable[[], Any]) -> int:
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


def _server(serve: Serve) -> tuple[Served, dict[str, SyncLangGraphClient]]:
    auth = api_keys({**KEYS, ROOT: Identity(id="root", permissions=frozenset({"admin"}))})

    @auth.on("threads", "read")
    async def admins_read_all(ctx: RuleContext) -> bool | None:
        return True if "admin" in ctx.identity.permissions else None

    served = serve(create_app(echo_agent(), auth=auth))
    clients = {}
    for key, who in [*KEYS.items(), (ROOT, "root")]:
        clients[who] = served.client(api_key=key)
    return served, clients


def _shape(thread: dict[str, Any]) -> dict[str, Any]:
    """What a made thread answers, less what differs between any two."""
    return {
        k: v for k, v in thread.items() if k not in ("created_at", "updated_at", "state_updated_at")
    }


def test_another_users_id_answers_as_an_absent_one(serve: Serve) -> None:
    _, users = _server(serve)
    alice, bob, carol, root = users["alice"], users["bob"], users["carol"], users["root"]
    mine = alice.threads.create(thread_id="tA", metadata={"topic": "alice's"})
    alice.runs.wait("tA", "agent", input=say("from alice"))
    alice_state = alice.threads.get_state("tA")

    # Bob's create of Alice's id answers as Bob's create of an id nobody has.
    absent = bob.threads.create(thread_id="tB", metadata={"topic": "bob's"})
    taken = bob.threads.create(thread_id="tA", metadata={"topic": "bob's"})
    assert _shape(taken) == {**_shape(absent), "thread_id": "tA"}
    assert taken["metadata"]["owner"] == "bob"
    # Now it is Bob's own id: his second create is a conflict with himself.
    assert status_of(lambda: bob.threads.create(thread_id="tA")) == 409
    assert bob.threads.create(thread_id="tA", if_exists="do_nothing")["metadata"]["owner"] == "bob"

    # Every endpoint takes "tA" as each caller's own.
    bob.runs.wait("tA", "agent", input=say("from bob"))
    assert "from alice" not in str(bob.threads.get_state("tA")["values"])
    assert "seen: from bob" in str(bob.threads.get_state("tA")["values"])
    assert alice.threads.get_state("tA") == alice_state
    assert len(bob.threads.get_history("tA")) == len(alice.threads.get_history("tA"))
    bob_run = bob.runs.list("tA")[0]
    alice_run = alice.runs.list("tA")[0]
    assert bob_run["run_id"] != alice_run["run_id"]
    assert bob_run["thread_id"] == alice_run["thread_id"] == "tA"
    assert status_of(lambda: bob.runs.get("tA", alice_run["run_id"])) == 404
    assert status_of(lambda: bob.runs.join("tA", alice_run["run_id"])) == 404
    assert bob.runs.join("tA", bob_run["run_id"])["messages"][-1]["content"] == "seen: from bob"
    parts = list(bob.runs.stream("tA", "agent", input=say("again"), stream_mode="values"))
    assert any("from bob" in str(p.data) for p in parts)
    assert not any("from alice" in str(p.data) for p in parts)
    bob.threads.update("tA", metadata={"topic": "patched by bob"})
    assert alice.threads.get("tA")["metadata"]["topic"] == "alice's"
    assert [t["metadata"]["owner"] for t in bob.threads.search(ids=["tA"])] == ["bob"]
    assert [t["metadata"]["owner"] for t in alice.threads.search(ids=["tA"])] == ["alice"]
    assert bob.threads.count() == 2

    # A run that makes its thread does so the same way (Carol had no tA).
    carol.runs.wait("tA", "agent", input=say("from carol"), if_not_exists="create")
    assert carol.threads.get("tA")["metadata"]["owner"] == "carol"
    assert "from alice" not in str(carol.threads.get_state("tA")["values"])

    # An administrator's rule reaches the first owner's thread.
    assert root.threads.get("tA")["metadata"]["owner"] == "alice"
    assert root.threads.get_state("tA") == alice_state

    # Deleting his deletes his; Alice's stays, and the id is Bob's to make again.
    bob.threads.delete("tA")
    assert status_of(lambda: bob.threads.get("tA")) == 404
    assert alice.threads.get_state("tA") == alice_state
    assert bob.threads.create(thread_id="tA")["metadata"]["owner"] == "bob"
    assert bob.threads.get_state("tA")["values"] == {}
    assert alice.threads.get("tA")["created_at"] == mine["created_at"]


def test_an_id_is_one_path_segment(serve: Serve) -> None:
    served, users = _server(serve)
    with httpx.Client(base_url=served.url) as http:
        made = http.post(
            "/threads", json={"thread_id": "a/b"}, headers={"x-api-key": next(iter(KEYS))}
        )
    assert made.status_code == 422
    assert "without '/'" in made.json()["detail"]
    assert users["alice"].threads.search() == []


def test_two_processes_agree_whose_id_is_whose(serve: Serve, postgres_dsn: str) -> None:
    """Two apps sharing threads and runs through PostgreSQL (as ``--workers`` do):
    whichever answers, an id means the same thread for each user."""
    from deepactors.persistence import PostgresCheckpointer

    def app() -> Any:
        agent = echo_agent(checkpointer=PostgresCheckpointer(postgres_dsn))
        return create_app(agent, auth=api_keys(KEYS), runs_db=postgres_dsn)

    one, two = serve(app()), serve(app())
    key = {who: k for k, who in KEYS.items()}

    def user(served: Served, who: str) -> SyncLangGraphClient:
        return served.client(api_key=key[who])

    user(one, "alice").threads.create(thread_id="tA", metadata={"topic": "alice's"})
    user(one, "alice").runs.wait("tA", "agent", input=say("from alice"))
    # Bob, through the other process: a tA of his own.
    made = user(two, "bob").threads.create(thread_id="tA", metadata={"topic": "bob's"})
    assert made["metadata"]["owner"] == "bob"
    user(two, "bob").runs.wait("tA", "agent", input=say("from bob"))
    for served in (one, two):
        alice, bob = user(served, "alice"), user(served, "bob")
        assert alice.threads.get("tA")["metadata"]["topic"] == "alice's"
        assert bob.threads.get("tA")["metadata"]["topic"] == "bob's"
        assert "from bob" not in str(alice.threads.get_state("tA")["values"])
        assert "from alice" not in str(bob.threads.get_state("tA")["values"])
        assert [r["thread_id"] for r in bob.runs.list("tA")] == ["tA"]

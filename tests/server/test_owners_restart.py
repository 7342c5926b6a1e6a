"""Owners survive a restart of a single-process ``deepactors serve --auth --db x.db``.

A thread's metadata (its owner among it) lived in the server's memory alone: after
a restart every thread answered 404 to its owner (and re-creating it 409), so each
restart lost every conversation. It is now kept with the thread, in a table of the
checkpointer's SQLite file. A real server process, stopped and started again on
the same file, on uvicorn (asyncio) and hypercorn (trio).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from .serve_process import serving

APP = """
from deepactors import create_deep_agent
from deepactors.models import FunctionModel


def model(request):
    return "seen: " + " | ".join(m.text for m in request.messages if m.role == "user")


agent = create_deep_agent(FunctionModel(model))
"""
KEYS = {"alice": "alice-key-0123456789abcd", "bob": "bob-key-0123456789abcdef"}


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def status_of(call: Any) -> int:
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_a_restarted_server_serves_each_owner_their_threads(loop: str, tmp_path: Path) -> None:
    (tmp_path / "owned_app.py").write_text(APP)
    (tmp_path / "keys.txt").write_text("".join(f"{k} {who}\n" for who, k in KEYS.items()))
    args = ["owned_app:agent", "--loop", loop, "--auth", "keys-file:keys.txt"]
    args += ["--db", "threads.db"]
    with (
        serving(args, tmp_path) as url,
        get_sync_client(url=url, api_key=KEYS["alice"]) as alice,
        get_sync_client(url=url, api_key=KEYS["bob"]) as bob,
    ):
        ran = alice.threads.create(metadata={"topic": "ran"})["thread_id"]
        alice.runs.wait(ran, "agent", input=say("hello"))
        idle = alice.threads.create(thread_id="never-run", metadata={"topic": "idle"})
        alice.threads.update(ran, metadata={"topic": "ran, patched"})
        alice.threads.create(thread_id="same-id")
        bob.threads.create(thread_id="same-id", metadata={"topic": "bob's"})
        bob.runs.wait("same-id", "agent", input=say("from bob"))
        doomed = alice.threads.create()["thread_id"]
        alice.threads.delete(doomed)
        before = {
            "state": alice.threads.get_state(ran),
            "alice": sorted(t["thread_id"] for t in alice.threads.search()),
            "bob": bob.threads.get_state("same-id"),
        }
    with (
        serving(args, tmp_path) as url,
        get_sync_client(url=url, api_key=KEYS["alice"]) as alice,
        get_sync_client(url=url, api_key=KEYS["bob"]) as bob,
    ):
        assert alice.threads.get_state(ran) == before["state"]
        assert alice.threads.get(ran)["metadata"]["topic"] == "ran, patched"
        got = alice.threads.get("never-run")
        assert got["metadata"] == {**idle["metadata"]}
        assert got["created_at"] == idle["created_at"]
        assert sorted(t["thread_id"] for t in alice.threads.search()) == before["alice"]
        assert status_of(lambda: alice.threads.get(doomed)) == 404
        # Each owner's, as before: re-creating one's own is a conflict with oneself.
        assert status_of(lambda: alice.threads.create(thread_id="never-run")) == 409
        assert bob.threads.get_state("same-id") == before["bob"]
        assert bob.threads.get("same-id")["metadata"]["topic"] == "bob's"
        assert alice.threads.get("same-id")["metadata"]["owner"] == "alice"
        assert status_of(lambda: bob.threads.get(ran)) == 404
        assert [t["thread_id"] for t in bob.threads.search()] == ["same-id"]
        alice.runs.wait(ran, "agent", input=say("after"))
        values = alice.threads.get_state(ran)["values"]
        assert values["messages"][-1]["content"] == "seen: hello | after"


async def test_metadata_damaged_on_disk_is_an_error_not_an_owner(tmp_path: Path) -> None:
    from deepactors.errors import CheckpointCorrupt
    from deepactors.persistence import SqliteThreadMetadata

    kept = SqliteThreadMetadata(tmp_path / "t.db")
    await kept.put("t1", {"owner": "alice"}, created_at=1.0)
    await kept.put("t1", {"owner": "alice", "topic": "x"}, created_at=5.0)  # keeps its time
    (saved,) = await kept.all()
    assert (saved.metadata, saved.created_at) == ({"owner": "alice", "topic": "x"}, 1.0)
    await kept.aclose()
    with sqlite3.connect(tmp_path / "t.db") as raw:
        raw.execute("""UPDATE thread_metadata SET metadata = '{"owner":"bob","topic":"x"}'""")
    kept = SqliteThreadMetadata(tmp_path / "t.db")
    with pytest.raises(CheckpointCorrupt, match=r"thread 't1'.*checksum"):
        await kept.get("t1")
    with pytest.raises(CheckpointCorrupt, match="checksum"):
        await kept.all()
    await kept.delete("t1")
    assert await kept.all() == []
    await kept.aclose()

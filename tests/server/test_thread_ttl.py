"""Threads' time to live through langgraph-sdk: ``threads.create(ttl=)``, ``update(ttl=)``,
a server default, the sweep that deletes them, never during a run.

The times are real (the server's sweep runs on its own clock in its own thread):
a fraction of a second, with generous bounds that only guard against a hang.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from deepactors.errors import ConfigurationError
from deepactors.persistence import MemoryCheckpointer, SqliteCheckpointer
from deepactors.server import create_app
from deepactors.server._langgraph_json import thread_expiry
from deepactors.server._thread_ttl import ThreadTTL
from tests.waiting import wait_until_sync

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]

SHORT = 0.004  # minutes: 0.24 s
SWEEP = 0.05  # seconds between sweeps


def _gone(client: SyncLangGraphClient, thread_id: str) -> bool:
    try:
        client.threads.get(thread_id)
    except NotFoundError:
        return True
    return False


def _until_gone(client: SyncLangGraphClient, thread_id: str, within: float = 20.0) -> None:
    """Wait until the sweep deleted the thread (the bound only guards against a hang)."""
    wait_until_sync(
        lambda: _gone(client, thread_id),
        what=f"thread {thread_id} swept",
        timeout=within,
        interval=SWEEP,
    )


def test_a_thread_past_its_ttl_is_deleted_and_others_are_kept(serve: Serve) -> None:
    probe = Probe()
    client = serve(create_app({"echo": blocking_agent(probe)}, thread_ttl_sweep=SWEEP)).client()
    brief = client.threads.create(ttl={"ttl": SHORT, "strategy": "delete"})["thread_id"]
    kept = client.threads.create()["thread_id"]
    seen = client.threads.get(brief, include=["ttl"])
    assert seen["ttl"]["strategy"] == "delete"
    assert seen["ttl"]["ttl"] == pytest.approx(SHORT)
    assert client.threads.get(kept, include=["ttl"])["ttl"] is None
    _until_gone(client, brief)
    assert client.threads.get(kept)["thread_id"] == kept
    assert [t["thread_id"] for t in client.threads.search()] == [kept]


def test_a_run_in_flight_keeps_its_thread_and_the_ttl_counts_from_its_end(
    serve: Serve,
) -> None:
    probe = Probe()
    client = serve(create_app({"echo": blocking_agent(probe)}, thread_ttl_sweep=SWEEP)).client()
    thread_id = client.threads.create(ttl=SHORT)["thread_id"]
    run = client.runs.create(
        thread_id, "echo", input={"messages": [{"role": "user", "content": "wait"}]}
    )
    assert probe.blocked.wait(30)
    # An idle thread with the same ttl, made after it: once a sweep took that one,
    # this one was past its ttl too (a sweep's own proof, where a sleep hoped).
    witness = client.threads.create(ttl=SHORT)["thread_id"]
    _until_gone(client, witness)
    assert client.threads.get(thread_id)["status"] == "busy"
    probe.release.set()
    client.runs.join(thread_id, run["run_id"])
    assert client.threads.get(thread_id)["status"] == "idle"  # not deleted under its run
    _until_gone(client, thread_id)


class _SlowDelete(MemoryCheckpointer):
    """Deletes wait for the test: the moment a thread is forgotten by the server
    and its records are not gone yet (a sweep or a DELETE on a loaded machine)."""

    def __init__(self) -> None:
        super().__init__()
        self.deleting = threading.Event()
        self.release = threading.Event()

    async def delete_thread(self, thread_id: str) -> None:
        self.deleting.set()
        await anyio.to_thread.run_sync(self.release.wait, abandon_on_cancel=True)
        await super().delete_thread(thread_id)


def test_a_thread_being_deleted_is_not_found_again_from_its_records(serve: Serve) -> None:
    # The sweep's flake: a client's read while the records were being deleted
    # found them and made the thread again, with no ttl, for good.
    saver = _SlowDelete()
    served = serve(create_app({"echo": blocking_agent(Probe(), checkpointer=saver)}))
    client, deleter = served.client(), served.client()
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "echo", input={"messages": [{"role": "user", "content": "hi"}]})
    deleting = threading.Thread(target=deleter.threads.delete, args=(thread_id,))
    deleting.start()
    try:
        assert saver.deleting.wait(30)
        assert _gone(client, thread_id)  # forgotten, though its records are still there
    finally:
        saver.release.set()
        deleting.join(30)
    assert _gone(client, thread_id)
    assert client.threads.search() == []


def test_the_server_default_and_a_patched_ttl(serve: Serve) -> None:
    client = serve(
        create_app({"echo": blocking_agent(Probe())}, thread_ttl=SHORT * 60, thread_ttl_sweep=SWEEP)
    ).client()
    defaulted = client.threads.create()["thread_id"]
    patched = client.threads.create()["thread_id"]
    client.threads.update(patched, metadata={"keep": True}, ttl=60)  # an hour
    assert client.threads.get(patched, include=["ttl"])["ttl"]["ttl"] == 60
    _until_gone(client, defaulted)
    assert client.threads.get(patched)["metadata"]["keep"] is True


@pytest.mark.parametrize(
    "ttl",
    [
        {"ttl": 5, "strategy": "archive"},
        {"ttl": -1},
        {"ttl": 0},
        {"ttl": "5"},
        {"minutes": 5},
    ],
)
def test_bad_ttls_are_refused_naming_the_field(serve: Serve, ttl: dict[str, object]) -> None:
    client = serve(create_app({"echo": blocking_agent(Probe())})).client()
    with pytest.raises(UnprocessableEntityError) as refused:
        client.threads.create(ttl=ttl)
    assert "ttl" in refused.value.response.json()["detail"]
    assert client.threads.search() == []


def test_a_thread_ttl_is_kept_with_the_thread_across_a_restart(
    serve: Serve, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"

    def app() -> object:
        return create_app(
            {"echo": blocking_agent(Probe())},
            checkpointer=SqliteCheckpointer(db),
            thread_ttl_sweep=SWEEP,
        )

    first = serve(app())
    brief = first.client().threads.create(ttl={"ttl": 10})["thread_id"]
    first.stop()
    with sqlite3.connect(db) as raw:  # kept in seconds beside the thread's owner
        (ttl,) = raw.execute("SELECT ttl FROM thread_metadata").fetchone()
    assert ttl == 600
    again = serve(app()).client()
    assert again.threads.get(brief, include=["ttl"])["ttl"]["ttl"] == 10


def test_langgraph_json_and_the_flag_give_the_default(tmp_path: Path) -> None:
    assert thread_expiry(None) == ThreadTTL(None, "delete", 300.0)
    assert thread_expiry(None, 2) == ThreadTTL(120.0, "delete", 300.0)
    config = tmp_path / "langgraph.json"
    config.write_text(
        '{"graphs": {}, "checkpointer": {"ttl": {"strategy": "delete",'
        ' "default_ttl": 30, "sweep_interval_minutes": 1}}}'
    )
    assert thread_expiry(config, 2) == ThreadTTL(1800.0, "delete", 60.0)
    config.write_text('{"checkpointer": {"ttl": {"strategy": "keep_latest"}}}')
    assert thread_expiry(config, 2) == ThreadTTL(120.0, "keep_latest", 300.0)
    assert thread_expiry(None, 2, "keep_latest") == ThreadTTL(120.0, "keep_latest", 300.0)
    config.write_text('{"checkpointer": {"ttl": {"strategy": "archive"}}}')
    with pytest.raises(ConfigurationError, match="strategy"):
        thread_expiry(config)
    with pytest.raises(ConfigurationError, match="thread_ttl_strategy"):
        create_app({"echo": blocking_agent(Probe())}, thread_ttl_strategy="archive")  # type: ignore[arg-type]
    config.write_text('{"checkpointer": {"ttl": {"default_ttl": 0}}}')
    with pytest.raises(ConfigurationError, match="default_ttl"):
        thread_expiry(config)
    with pytest.raises(ConfigurationError, match="--thread-ttl"):
        thread_expiry(None, -5)
    with pytest.raises(ConfigurationError, match="thread_ttl"):
        create_app({"echo": blocking_agent(Probe())}, thread_ttl=float("nan"))


def _until_compacted(client: SyncLangGraphClient, thread_id: str, within: float = 20.0) -> None:
    """Wait until the sweep kept only the thread's latest state (the bound guards a hang)."""
    wait_until_sync(
        lambda: len(client.threads.get_history(thread_id, limit=100)) <= 1,
        what=f"thread {thread_id} compacted",
        timeout=within,
        interval=SWEEP,
    )


def test_a_keep_latest_thread_past_its_ttl_keeps_its_state_and_loses_its_history(
    serve: Serve, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"

    def app(**kwargs: object) -> object:
        return create_app(
            {"echo": blocking_agent(Probe())},
            checkpointer=SqliteCheckpointer(db),
            thread_ttl_sweep=SWEEP,
            **kwargs,
        )

    first = serve(app())
    client = first.client()
    thread_id = client.threads.create(ttl={"ttl": 60, "strategy": "keep_latest"})["thread_id"]
    assert client.threads.get(thread_id, include=["ttl"])["ttl"]["strategy"] == "keep_latest"
    for text in ("one", "two"):
        client.runs.wait(thread_id, "echo", input={"messages": [{"role": "user", "content": text}]})
    state = client.threads.get_state(thread_id)
    first.stop()
    # Its strategy is kept beside it; a short server default makes it expire now.
    again = serve(app(thread_ttl=SHORT * 60, thread_ttl_strategy="keep_latest")).client()
    assert again.threads.get(thread_id, include=["ttl"])["ttl"]["strategy"] == "keep_latest"
    defaulted = again.threads.create()["thread_id"]
    again.runs.wait(defaulted, "echo", input={"messages": [{"role": "user", "content": "hi"}]})
    again.threads.update(thread_id, metadata={}, ttl={"ttl": SHORT, "strategy": "keep_latest"})
    _until_compacted(again, thread_id)
    _until_compacted(again, defaulted)
    kept = again.threads.get_state(thread_id)
    assert (kept["values"], kept["next"]) == (state["values"], state["next"])
    assert again.threads.get(defaulted)["status"] == "idle"  # kept, not deleted
    again.runs.wait(thread_id, "echo", input={"messages": [{"role": "user", "content": "three"}]})
    said = [m["content"] for m in again.threads.get_state(thread_id)["values"]["messages"]]
    assert said[-1] == "echo: three"
    assert len(said) == 6

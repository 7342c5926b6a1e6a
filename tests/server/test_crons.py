"""Crons through langgraph-sdk's ``client.crons``: scheduled runs, on a thread or on new ones.

Real servers, real time: a cron fires on the wall clock, once a second here.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from deepactors import AssistantMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app
from deepactors.server.auth import api_keys
from tests.waiting import wait_until_sync

from .conftest import Served
from .serve_process import serving

Serve = Callable[..., Served]
EVERY_SECOND = "* * * * * *"
KEY_A, KEY_B = "alice-key-0123456789", "bob-key-0123456789ab"
HELLO = {"messages": [{"role": "user", "content": "hello"}]}

AGENT_MODULE = """
from deepactors import AssistantMessage, create_deep_agent
from deepactors.models import FunctionModel

agent = create_deep_agent(FunctionModel(lambda r: AssistantMessage(content="tick")))
"""


def echo() -> Any:
    def model(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content=f"echo: {request.messages[-1].text}")

    return create_deep_agent(FunctionModel(model), checkpointer=MemoryCheckpointer())


class Witness:
    """A cron firing every second on a thread of its own: while it fires, the scheduler
    makes its passes, so what did not happen meanwhile would not (a clock of the
    scheduler's own, where a fixed sleep would only hope it had a pass)."""

    def __init__(self, client: SyncLangGraphClient) -> None:
        self._client = client
        self.thread_id = client.threads.create()["thread_id"]
        self.cron_id = client.crons.create_for_thread(
            self.thread_id, "echo", schedule=EVERY_SECOND, input=HELLO
        )["cron_id"]

    def _fired(self) -> int:
        return len(self._client.runs.list(self.thread_id, limit=100))

    def two_more_passes(self) -> None:
        """Return once it has fired twice more than now."""
        then = self._fired()
        wait_until_sync(lambda: self._fired() >= then + 2, what="the witness cron fired twice")


def test_a_thread_cron_fires_every_second_and_stops_when_deleted(serve: Serve) -> None:
    client = serve(create_app({"echo": echo()})).client()
    thread_id = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        thread_id, "echo", schedule=EVERY_SECOND, input=HELLO, metadata={"team": "a"}
    )
    assert cron["thread_id"] == thread_id
    assert cron["enabled"] is True
    assert cron["next_run_date"] is not None
    wait_until_sync(lambda: len(client.runs.list(thread_id, limit=100)) >= 3)
    witness = Witness(client)
    client.crons.delete(cron["cron_id"])
    deleted = datetime.now(UTC)
    witness.two_more_passes()
    client.crons.delete(witness.cron_id)
    runs = client.runs.list(thread_id, limit=100)
    # A firing already under way when the cron was deleted may still start; none after.
    late = [
        r
        for r in runs
        if datetime.fromisoformat(r["created_at"]) > deleted + timedelta(seconds=0.5)
    ]
    assert late == []
    ticks = [r["metadata"]["cron_tick"] for r in runs]
    assert len(set(ticks)) == len(ticks)  # one run per tick
    assert all(r["metadata"]["cron_id"] == cron["cron_id"] for r in runs)
    state = client.threads.get_state(thread_id)
    assert state["values"]["messages"][-1]["content"] == "echo: hello"
    assert client.crons.search() == []


def test_search_count_update_and_stateless_crons(serve: Serve) -> None:
    client = serve(create_app({"echo": echo()})).client()
    daily = client.crons.create(
        "echo", schedule="0 9 * * 1-5", timezone="Europe/Paris", input=HELLO, metadata={"k": 1}
    )
    assert daily["thread_id"] is None
    assert daily["timezone"] == "Europe/Paris"
    nine = datetime.fromisoformat(daily["next_run_date"]).astimezone(
        __import__("zoneinfo").ZoneInfo("Europe/Paris")
    )
    assert (nine.hour, nine.minute, nine.weekday() < 5) == (9, 0, True)
    kept = client.crons.create("echo", schedule=EVERY_SECOND, input=HELLO, on_run_completed="keep")
    assert client.crons.count() == 2
    assert [c["cron_id"] for c in client.crons.search(metadata={"k": 1})] == [daily["cron_id"]]
    # Each firing of a stateless cron that keeps its threads makes one.
    wait_until_sync(lambda: len(client.threads.search(limit=100)) >= 2)
    updated = client.crons.update(kept["cron_id"], enabled=False)
    assert updated["enabled"] is False
    assert updated["next_run_date"] is None
    witness = Witness(client)
    made = len(client.threads.search(limit=100))
    witness.two_more_passes()
    assert len(client.threads.search(limit=100)) <= made + 1  # one may have been under way
    assert [c["cron_id"] for c in client.crons.search(enabled=False)] == [kept["cron_id"]]
    moved = client.crons.update(daily["cron_id"], schedule="30 7 * * *", end_time=None)
    assert moved["schedule"] == "30 7 * * *"
    client.crons.delete(daily["cron_id"])
    with pytest.raises(NotFoundError):
        client.crons.delete(daily["cron_id"])


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"schedule": "every day"}, "schedule"),
        ({"schedule": "* * * *"}, "schedule"),
        ({"schedule": "0 9 * * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"schedule": "0 9 * * *", "webhook": "http://127.0.0.1/hook"}, "webhook"),
    ],
)
def test_bad_crons_are_refused_with_the_field_named(
    serve: Serve, fields: dict[str, Any], words: str
) -> None:
    client = serve(create_app({"echo": echo()})).client()
    with pytest.raises(UnprocessableEntityError) as refused:
        client.crons.create("echo", input=HELLO, **fields)
    assert words in str(refused.value.response.json()["detail"])
    assert client.crons.count() == 0


def test_a_bad_end_time_is_refused(serve: Serve) -> None:
    served = serve(create_app({"echo": echo()}))
    body = {"assistant_id": "echo", "schedule": "0 9 * * *", "end_time": "tomorrow"}
    with httpx.Client(base_url=served.url) as http:
        answer = http.post("/runs/crons", json=body)
    assert answer.status_code == 422
    assert "end_time" in answer.json()["detail"]


def test_a_crons_runs_are_its_creators_and_others_do_not_see_it(serve: Serve) -> None:
    auth = api_keys({KEY_A: "alice", KEY_B: "bob"})
    served = serve(create_app({"echo": echo()}, auth=auth))
    alice = served.client(api_key=KEY_A)
    bob = served.client(api_key=KEY_B)
    thread_id = alice.threads.create()["thread_id"]
    with pytest.raises(NotFoundError):
        bob.crons.create_for_thread(thread_id, "echo", schedule=EVERY_SECOND, input=HELLO)
    cron = alice.crons.create_for_thread(thread_id, "echo", schedule=EVERY_SECOND, input=HELLO)
    assert cron["user_id"] == "alice"
    assert bob.crons.search() == []
    assert bob.crons.count() == 0
    with pytest.raises(NotFoundError):
        bob.crons.delete(cron["cron_id"])
    with pytest.raises(NotFoundError):
        bob.crons.update(cron["cron_id"], enabled=False)
    # The runs it made act for alice: on her thread, which bob cannot see.
    wait_until_sync(lambda: len(alice.runs.list(thread_id)) >= 1)
    with pytest.raises(NotFoundError):
        bob.runs.list(thread_id)
    alice.crons.delete(cron["cron_id"])


@pytest.fixture
def pg_servers(tmp_path: Path, postgres_dsn: str) -> Iterator[tuple[str, str]]:
    (tmp_path / "cron_agent.py").write_text(AGENT_MODULE)
    args = ["cron_agent:agent", "--db", postgres_dsn]
    with serving(args, tmp_path) as a, serving(args, tmp_path) as b:
        yield a, b


def test_two_processes_on_one_database_fire_each_tick_once(pg_servers: tuple[str, str]) -> None:
    url_a, url_b = pg_servers
    with get_sync_client(url=url_a, timeout=20) as a, get_sync_client(url=url_b, timeout=20) as b:
        thread_id = a.threads.create()["thread_id"]
        cron = b.crons.create_for_thread(thread_id, "agent", schedule=EVERY_SECOND, input=HELLO)
        assert [c["cron_id"] for c in a.crons.search()] == [cron["cron_id"]]  # both see it
        # Ten ticks: each one a race between the two processes to claim it.
        wait_until_sync(lambda: len(a.runs.list(thread_id, limit=100)) >= 10, timeout=60)
        a.crons.delete(cron["cron_id"])
        runs = a.runs.list(thread_id, limit=100)
    ticks = sorted(datetime.fromisoformat(r["metadata"]["cron_tick"]) for r in runs)
    fired = sorted((r["metadata"]["cron_tick"], r["run_id"]) for r in runs)
    assert len({r["run_id"] for r in runs}) == len(runs), f"a run listed twice: {fired}"
    assert len(set(ticks)) == len(ticks), f"a tick fired twice: {fired}"
    steps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(ticks)}
    assert steps <= {1.0, 2.0}, steps  # every second (a busy second may be coalesced)
    assert sum(1 for s in steps if s == 1.0) >= 1


def test_crons_in_a_sqlite_db_survive_a_restart_and_fire(tmp_path: Path) -> None:
    (tmp_path / "cron_agent.py").write_text(AGENT_MODULE)
    args = ["cron_agent:agent", "--db", str(tmp_path / "server.db")]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        daily = client.crons.create("agent", schedule="0 9 * * *", input=HELLO)
        thread_id = client.threads.create()["thread_id"]
        client.runs.wait(thread_id, "agent", input=HELLO)  # saved: known after the restart
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        assert [c["cron_id"] for c in client.crons.search()] == [daily["cron_id"]]
        ticking = client.crons.create_for_thread(
            thread_id, "agent", schedule=EVERY_SECOND, input=HELLO
        )
        wait_until_sync(
            lambda: any(r["metadata"].get("cron_id") for r in client.runs.list(thread_id))
        )
        client.crons.delete(ticking["cron_id"])


IMPORT_WATCH = """
import sys, threading

import anyio, httpx
from deepactors import AssistantMessage, create_deep_agent
from deepactors.models import FunctionModel
from deepactors.server import create_app

assert "croniter" not in sys.modules
where = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "croniter":
            where.append(threading.current_thread() is threading.main_thread())
        return None


sys.meta_path.insert(0, Watch())
app = create_app(create_deep_agent(FunctionModel(lambda r: AssistantMessage(content="hi"))))


async def main():
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            cron = {"assistant_id": "main", "schedule": "0 9 * * *"}
            made = await http.post("/runs/crons", json=cron)
            assert made.status_code == 200, made.text


anyio.run(main, backend=sys.argv[1])
print(where)
"""


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_the_first_cron_imports_croniter_off_the_event_loop(loop: str, tmp_path: Path) -> None:
    # In a process of its own: croniter must not be imported yet.
    script = tmp_path / "watch.py"
    script.write_text(IMPORT_WATCH)
    done = subprocess.run(
        [sys.executable, str(script), loop], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[False]"], done.stdout

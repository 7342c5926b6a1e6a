"""A served app whose PostgreSQL restarts (issue 34, item 1).

The app keeps its threads (``PostgresCheckpointer``) and shares its runs
(``runs_db``) in one PostgreSQL, on uvicorn (asyncio) and hypercorn (trio).
The database is stopped and started again on the same socket and data by the
tests' own server helper (``tests/pgserver.py``), a server of this module's
own so that the session's, which other tests use, is left alone.

While the database is down, ``/ok`` (liveness) still answers 200, ``/ready``
answers 503 naming it, and requests that need it fail in bounded time; once it
is back, ``/ready`` answers 200 and runs and thread endpoints work again. A run
in flight across the restart ends in an error that says what happened.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import httpx
import pytest
from starlette.applications import Starlette

from deepactors.persistence import PostgresCheckpointer
from deepactors.server import create_app
from deepactors.server.relay import backoff
from tests.pgserver import PostgresServer

from .agents import Probe, blocking_agent
from .conftest import Served
from .pg_outage import BOUND, say, until


def _ready(http: httpx.Client) -> bool:
    return http.get("/ready").status_code == 200


def _app(dsn: str, probe: Probe) -> Starlette:
    agent = blocking_agent(probe, checkpointer=PostgresCheckpointer(dsn))
    return create_app({"echo": agent}, runs_db=dsn)


def test_the_server_answers_again_after_its_database_restarts(
    serve: Callable[[Starlette], Served], database: tuple[PostgresServer, str]
) -> None:
    pg, dsn = database
    served = serve(_app(dsn, Probe()))
    http = served.http(timeout=BOUND)
    client = served.client()
    thread = client.threads.create()
    done = client.runs.wait(thread["thread_id"], "echo", input=say("before"))
    assert done["messages"][-1]["content"] == "echo: before"  # type: ignore[call-overload]
    assert http.get("/ready").status_code == 200

    pg.stop()
    try:
        assert http.get("/ok").status_code == 200  # alive: nothing to restart
        until(lambda: http.get("/ready").status_code == 503, "/ready never said 503")
        answer = http.get("/ready")
        assert "postgresql://" in answer.text, answer.text
        # What needs the database fails, in bounded time (http's timeout), and says so.
        tid = thread["thread_id"]
        body = {"assistant_id": "echo", "input": say("down")}
        refused = http.post(f"/threads/{tid}/runs/wait", json=body)
        assert refused.status_code >= 500 or "__error__" in refused.text, refused.text
        assert "postgresql://" in refused.text, refused.text
        assert http.get(f"/threads/{tid}/state").status_code >= 500
        # A stateless run needs no database: it still runs.
        fine = http.post("/runs/wait", json={"assistant_id": "echo", "input": say("free")})
        assert fine.status_code == 200, fine.text
    finally:
        pg.start()

    until(lambda: http.get("/ready").status_code == 200, "/ready never said 200 again")
    assert http.get("/ok").status_code == 200
    done = client.runs.wait(thread["thread_id"], "echo", input=say("after"))
    assert done["messages"][-1]["content"] == "echo: after"  # type: ignore[call-overload]
    state = client.threads.get_state(thread["thread_id"])
    texts = [m["content"] for m in state["values"]["messages"]]  # type: ignore[call-overload]
    assert texts[-1] == "echo: after"
    assert thread["thread_id"] in [t["thread_id"] for t in client.threads.search()]
    fresh = client.runs.wait(None, "echo", input=say("stateless"))
    assert fresh["messages"][-1]["content"] == "echo: stateless"  # type: ignore[call-overload]


def test_a_run_in_flight_across_a_restart_ends_in_a_clear_error(
    serve: Callable[[Starlette], Served], database: tuple[PostgresServer, str]
) -> None:
    pg, dsn = database
    probe = Probe()
    served = serve(_app(dsn, probe))
    client = served.client(timeout=BOUND)  # the join ends within it, or fails
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "echo", input=say("wait"))
    assert probe.blocked.wait(BOUND)
    pg.restart()
    probe.release.set()
    joined = client.runs.join(thread["thread_id"], run["run_id"])
    ended = client.runs.get(thread["thread_id"], run["run_id"])
    assert ended["status"] == "error", ended
    # Why, in words, naming the database: the thread's lease ended with the
    # session (nothing more is saved), or a save in flight was cut off.
    error = joined["__error__"]
    assert error["error"] == "CheckpointError", error
    assert "postgresql://" in error["message"], error
    http = served.http(timeout=BOUND)
    until(lambda: http.get("/ready").status_code == 200, "/ready never said 200 again")
    done = client.runs.wait(thread["thread_id"], "echo", input=say("again"))
    assert done["messages"][-1]["content"] == "echo: again"  # type: ignore[call-overload]


@pytest.mark.parametrize("release_while_down", [False, True], ids=["after", "during"])
def test_another_process_sees_a_run_that_outlived_the_restart_finish(
    serve: Callable[[Starlette], Served],
    database: tuple[PostgresServer, str],
    release_while_down: bool,
) -> None:
    """A run needing no database (threads in memory) goes on through the outage;
    the process that follows it sees it finish, not lost, whether it ended after
    the database came back (its owner claimed it under its new connection) or
    while it was down (its final status was kept and written on reconnecting)."""
    pg, dsn = database
    probe = Probe()
    owner = serve(create_app({"echo": blocking_agent(probe)}, runs_db=dsn))
    other = serve(create_app({"echo": blocking_agent(Probe())}, runs_db=dsn))
    owner_http = owner.http(timeout=BOUND)
    other_http = other.http(timeout=BOUND)
    thread = owner.client().threads.create()
    tid = thread["thread_id"]
    run = owner.client().runs.create(tid, "echo", input=say("wait"))
    assert probe.blocked.wait(BOUND)

    pg.stop()
    try:
        until(lambda: owner_http.get("/ready").status_code == 503, "the owner never noticed")
        if release_while_down:
            probe.release.set()
            until(lambda: probe.active == 0, "the run did not end")
    finally:
        pg.start()
    for http in (owner_http, other_http):
        until(functools.partial(_ready, http), "/ready never said 200 again")
    seen = other.client().runs.get(tid, run["run_id"])
    assert seen["status"] in ("running", "success"), seen
    probe.release.set()
    other.client().runs.join(tid, run["run_id"])
    assert other.client().runs.get(tid, run["run_id"])["status"] == "success"


def test_reconnection_waits_grow_to_a_bound_and_are_spread() -> None:
    waits = [[backoff(n) for n in range(12)] for _ in range(50)]
    for series in waits:
        for n, wait in enumerate(series):
            ceiling = min(5.0, 0.25 * 2**n)
            assert ceiling / 2 <= wait <= ceiling
    assert len({series[-1] for series in waits}) > 1  # jittered: not all in step


def test_joining_another_process_run_while_the_database_stays_down_ends_in_bounded_time(
    serve: Callable[[Starlette], Served],
    database: tuple[PostgresServer, str],
) -> None:
    """The follower keeps trying for its runs_db_patience (default 30 s; 1 s here),
    then the run ends here as an error that says the runs database is unreachable."""
    pg, dsn = database
    probe = Probe()
    owner = serve(create_app({"echo": blocking_agent(probe)}, runs_db=dsn))
    other = serve(create_app({"echo": blocking_agent(Probe())}, runs_db=dsn, runs_db_patience=1.0))
    tid = owner.client().threads.create()["thread_id"]
    run = owner.client().runs.create(tid, "echo", input=say("wait"))
    assert probe.blocked.wait(BOUND)
    assert other.client().runs.get(tid, run["run_id"])["status"] == "running"  # followed
    pg.stop()
    try:
        joined = other.client(timeout=BOUND).runs.join(tid, run["run_id"])  # within it, or fails
    finally:
        pg.start()
        probe.release.set()
    error = joined["__error__"]
    assert error["error"] == "RunsDatabaseUnreachable", error
    assert "postgresql://" in error["message"], error

"""A database that cannot be reached answers 503 with ``Retry-After``; a fault stays 500.

The app keeps its threads (``PostgresCheckpointer``), its store
(``PostgresStore``) and its shared runs (``runs_db``) in one PostgreSQL of this
module's own (``tests/pgserver.py``), served by uvicorn (asyncio) and hypercorn
(trio). With the database stopped, every endpoint that needs it answers 503,
``Retry-After`` and a detail naming the database and since when, which is what
clients and load balancers take for "try again"; once it is started again the
same requests succeed. The first request to find the database gone is
answered within seconds too, not after the pool's 30 s; a pool whose
connections are all in use is not taken for an outage; and a run on one
process (no ``runs_db``) is refused with 503 while its checkpointer is down,
not started to fail later. A database that answers but refuses (its table is
gone) is a fault, not an outage: 500, no ``Retry-After``. A SQLite file
locked by another writer for longer than the busy timeout is a 503 too.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import psycopg
import pytest
from langgraph_sdk.errors import APIStatusError
from starlette.applications import Starlette

from deepactors.errors import CheckpointUnavailable
from deepactors.persistence import (
    PostgresCheckpointer,
    PostgresStore,
    SqliteStore,
)
from deepactors.server import create_app
from tests.pgserver import PostgresServer
from tests.waiting import wait_until

from .agents import Probe, blocking_agent
from .conftest import Served
from .pg_outage import BOUND, say, until

SOON = 10.0
"""Seconds within which the first request to find the database down is answered:
well under the pool's 30 s, generous for a shared machine."""

DOWN_WAIT = 0.25
"""The pool's wait while the database is known down, here (1 s by default)."""
PROBE_AFTER = 0.5
"""The pool's wait before it asks the server whether it is up, here (2 s by default)."""


SHORT_WAITS: dict[str, float] = {"down_wait": DOWN_WAIT, "probe_after": PROBE_AFTER}
"""The waits an outage costs each request, shorter than their defaults: the same
paths (known down, then probed), a dozen requests in a second or two."""


def _app(dsn: str) -> Starlette:
    agent = blocking_agent(Probe(), checkpointer=PostgresCheckpointer(dsn, **SHORT_WAITS))
    return create_app({"echo": agent}, runs_db=dsn, store=PostgresStore(dsn, **SHORT_WAITS))


def _lone_app(dsn: str) -> Starlette:
    """Threads and store in PostgreSQL, runs in this process only (no ``runs_db``)."""
    agent = blocking_agent(Probe(), checkpointer=PostgresCheckpointer(dsn, **SHORT_WAITS))
    return create_app({"echo": agent}, store=PostgresStore(dsn, **SHORT_WAITS))


def _answered_503_soon(what: str, request: Callable[[], httpx.Response]) -> str:
    """``request``'s 503 detail; ``request`` is made by a client that gives up past :data:`SOON`."""
    try:
        answer = request()
    except httpx.TimeoutException as exc:
        raise AssertionError(f"{what}: not answered within {SOON} s") from exc
    assert answer.status_code == 503, (what, answer.text)
    assert int(answer.headers["retry-after"]) > 0, what
    detail: str = answer.json()["detail"]
    assert "unreachable since" in detail, (what, detail)
    return detail


def _requests(http: httpx.Client, tid: str) -> dict[str, Callable[[], httpx.Response]]:
    """One request to each endpoint that needs the database, by what it does."""
    run = {"assistant_id": "echo", "input": say("down")}
    item = {"namespace": ["notes"], "key": "k"}
    return {
        "create thread": lambda: http.post("/threads", json={}),
        "create run": lambda: http.post(f"/threads/{tid}/runs", json=run),
        "wait for a run": lambda: http.post(f"/threads/{tid}/runs/wait", json=run),
        "stream a run": lambda: http.post(f"/threads/{tid}/runs/stream", json=run),
        "list runs": lambda: http.get(f"/threads/{tid}/runs"),
        "get state": lambda: http.get(f"/threads/{tid}/state"),
        "history": lambda: http.post(f"/threads/{tid}/history", json={}),
        "update state": lambda: http.post(f"/threads/{tid}/state", json={"values": {}}),
        "store get": lambda: http.get("/store/items", params={**item, "namespace": "notes"}),
        "store put": lambda: http.put("/store/items", json={**item, "value": {"v": 2}}),
        "store search": lambda: http.post("/store/items/search", json={"namespace_prefix": []}),
        "store namespaces": lambda: http.post("/store/namespaces", json={}),
    }


def test_an_unreachable_database_answers_503_with_retry_after_until_it_is_back(
    serve: Callable[[Starlette], Served], database: tuple[PostgresServer, str]
) -> None:
    pg, dsn = database
    served = serve(_app(dsn))
    http = served.http(timeout=BOUND)
    client = served.client()
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "echo", input=say("before"))
    client.store.put_item(["notes"], "k", {"v": 1})

    pg.stop()
    try:
        until(lambda: http.get("/ready").status_code == 503, "/ready never said 503")
        for what, request in _requests(http, tid).items():  # each within BOUND, http's timeout
            answer = request()
            assert answer.status_code == 503, (what, answer.text)
            assert int(answer.headers["retry-after"]) > 0, what
            detail = answer.json()["detail"]
            assert "postgresql://" in detail, (what, detail)
            assert detail.count("unreachable since") == 1, (what, detail)
        # Known down: answered without waiting for the pool (a client that waits no longer).
        with httpx.Client(base_url=served.url, timeout=DOWN_WAIT + 1.0) as brief:
            assert brief.get(f"/threads/{tid}/state").status_code == 503
            assert brief.get("/store/items", params={"namespace": "notes", "key": "k"}).is_error
        # What the langgraph-sdk client sees.
        with pytest.raises(APIStatusError) as caught:
            client.threads.get_state(tid)
        assert caught.value.response.status_code == 503
        assert caught.value.response.headers["retry-after"]
    finally:
        pg.start()

    until(lambda: http.get("/ready").status_code == 200, "/ready never said 200 again")
    for what, request in _requests(http, tid).items():
        answer = request()
        assert answer.status_code < 300, (what, answer.text)
        if what == "stream a run":
            assert "event: error" not in answer.text, answer.text
    # Nothing half-made during the outage is left behind: one thread made
    # before it, one after.
    found = client.threads.search(limit=100)
    assert len(found) == 2, found
    done = client.runs.wait(tid, "echo", input=say("after"))
    assert done["messages"][-1]["content"] == "echo: after"  # type: ignore[call-overload]
    assert client.store.get_item(["notes"], "k")["value"] == {"v": 2}


def test_the_first_request_to_find_the_database_down_is_answered_within_seconds(
    serve: Callable[[Starlette], Served], database: tuple[PostgresServer, str]
) -> None:
    pg, dsn = database
    served = serve(_lone_app(dsn))
    http = served.http(timeout=BOUND)
    soon = served.http(timeout=SOON)
    client = served.client()
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "echo", input=say("before"))
    client.store.put_item(["notes"], "k", {"v": 1})

    pg.stop()
    try:
        # Nothing asked the checkpointer or the store since (no /ready): each
        # request below is the first of its component to find the outage.
        detail = _answered_503_soon("get state", lambda: soon.get(f"/threads/{tid}/state"))
        assert detail.startswith("CheckpointUnavailable: postgresql://"), detail
        item = {"namespace": "notes", "key": "k"}
        detail = _answered_503_soon("store get", lambda: soon.get("/store/items", params=item))
        assert detail.startswith("StoreUnavailable: postgresql://"), detail
    finally:
        pg.start()
    until(lambda: http.get(f"/threads/{tid}/state").status_code == 200, "state never back")
    assert client.store.get_item(["notes"], "k")["value"] == {"v": 1}


def test_a_run_on_one_process_is_refused_with_503_while_its_checkpointer_is_down(
    serve: Callable[[Starlette], Served], database: tuple[PostgresServer, str]
) -> None:
    pg, dsn = database
    served = serve(_lone_app(dsn))
    http = served.http(timeout=BOUND)
    soon = served.http(timeout=SOON)
    client = served.client()
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "echo", input=say("before"))
    run = {"assistant_id": "echo", "input": say("down")}

    pg.stop()
    try:
        # Refused before it starts, not a 200 for a run that fails later.
        for path in ("runs", "runs/wait", "runs/stream"):
            create = functools.partial(soon.post, f"/threads/{tid}/{path}", json=run)
            detail = _answered_503_soon(path, create)
            assert detail.startswith("CheckpointUnavailable: postgresql://"), detail
        stateless = {**run, "on_completion": "keep"}  # its thread is saved too
        _answered_503_soon("keep", lambda: soon.post("/runs/wait", json=stateless))
        # A stateless run saves nothing: it does not need the database.
        gone = http.post("/runs/wait", json={**run, "input": say("stateless")})
        assert gone.status_code == 200, gone.text
    finally:
        pg.start()
    until(lambda: http.get("/ready").status_code == 200, "/ready never said 200 again")
    done = client.runs.wait(tid, "echo", input=say("after"))
    assert done["messages"][-1]["content"] == "echo: after"  # type: ignore[call-overload]
    # None of the refused runs was left behind on the thread.
    assert len(client.runs.list(tid)) == 2


async def test_a_lease_wait_tells_a_busy_pool_from_an_outage(
    database: tuple[PostgresServer, str],
) -> None:
    pg, dsn = database
    # The whole wait of a pool that stays busy, shorter than its 30 s.
    saver = PostgresCheckpointer(
        dsn, lease_connections=1, checkout_timeout=PROBE_AFTER + 4.0, **SHORT_WAITS
    )
    async with saver, AsyncExitStack() as held:
        await held.enter_async_context(saver.lease("a"))  # the pool's one lease connection
        got = anyio.Event()

        async def take_b() -> None:
            async with saver.lease("b"):
                got.set()

        # Busy past the first wait, freed in time: the waiter gets it, no 503.
        async with anyio.create_task_group() as tg:
            tg.start_soon(take_b)
            await anyio.sleep(PROBE_AFTER + 1.0)  # real: the pool's threads wait
            assert not got.is_set()
            await held.aclose()
        assert got.is_set()

        # Busy all along: unavailable (try again: 503), saying the pool is in
        # use, and not taken for an outage (the next request waits as long).
        await held.enter_async_context(saver.lease("a"))
        with anyio.fail_after(BOUND), pytest.raises(CheckpointUnavailable) as caught:
            async with saver.lease("b"):
                pass
        assert "all 1 of the pool in use" in str(caught.value), caught.value
        assert "unreachable" not in str(caught.value), caught.value
        await held.aclose()

        # Down: told within seconds, though the pool is empty as when busy.
        await anyio.to_thread.run_sync(pg.stop)
        try:
            with anyio.fail_after(SOON), pytest.raises(CheckpointUnavailable) as down:
                async with saver.lease("c"):
                    pass
            assert "unreachable since" in str(down.value), down.value
        finally:
            await anyio.to_thread.run_sync(pg.start)

        async def leased() -> bool:
            try:
                async with saver.lease("c"):
                    return True
            except CheckpointUnavailable:
                return False  # PostgreSQL is still starting again

        await wait_until(leased, what="a lease once PostgreSQL is back", timeout=BOUND)


def test_a_database_that_answers_but_refuses_is_a_500_not_a_503(
    serve: Callable[[Starlette], Served], database: tuple[PostgresServer, str]
) -> None:
    _, dsn = database
    served = serve(_app(dsn))
    http = served.http(timeout=BOUND)
    item = {"namespace": ["notes"], "key": "k", "value": {"v": 1}}
    assert http.put("/store/items", json=item).status_code == 204
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE store_items RENAME TO store_items_gone")
    answer = http.put("/store/items", json=item)
    assert answer.status_code == 500, answer.text
    assert "retry-after" not in answer.headers
    assert answer.json()["detail"].startswith("StoreError: postgresql://"), answer.text
    assert http.get("/ready").status_code == 200  # up: only what it holds is at fault


def test_a_sqlite_file_locked_by_another_writer_answers_503(
    serve: Callable[[Starlette], Served], tmp_path: Path
) -> None:
    # The wait for a writer to finish, shorter than its 5 s: the same SQLITE_BUSY.
    file = tmp_path / "store.db"
    store = SqliteStore(file, busy_timeout=1.0)
    served = serve(create_app({"echo": blocking_agent(Probe())}, store=store))
    http = served.http(timeout=BOUND)
    item = {"namespace": ["notes"], "key": "k", "value": {"v": 1}}
    assert http.put("/store/items", json=item).status_code == 204
    writer = sqlite3.connect(file, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process's write, never ending
        answer = http.put("/store/items", json=item)
        assert answer.status_code == 503, answer.text
        assert int(answer.headers["retry-after"]) > 0
        detail = answer.json()["detail"]
        assert detail.startswith("StoreUnavailable: "), detail
        assert str(file) in detail, detail
        assert "locked by another writer since" in detail, detail
        assert "(more than 1 s)" in detail, detail  # the store's own busy_timeout
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert http.put("/store/items", json=item).status_code == 204

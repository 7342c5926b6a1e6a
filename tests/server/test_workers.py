"""Two ``deepactors serve`` processes sharing runs through one PostgreSQL database.

A run created through one process is found, joined, streamed and cancelled
through the other, with the real ``langgraph-sdk`` client over real sockets, on
uvicorn (asyncio) and on hypercorn (trio). Threads are kept in one SQLite file
both processes open (its lease keeps one run of a thread at a time); runs and
their events go through PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from deepactors.errors import ConfigurationError
from deepactors.server import create_app

from .agents import Probe, blocking_agent
from .serve_process import serve_processes, serving
from .workers_pair import AGENT_MODULE as AGENT_MODULE
from .workers_pair import WorkersPair
from .workers_pair import release as release
from .workers_pair import workers_pair as workers_pair


def _input(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def test_a_run_created_on_one_process_is_streamed_and_joined_on_the_other(
    workers_pair: WorkersPair, release: Path
) -> None:
    url_a, url_b = workers_pair.a, workers_pair.b
    with get_sync_client(url=url_a, timeout=20) as a, get_sync_client(url=url_b, timeout=20) as b:
        thread_id = a.threads.create(metadata={"owner": "a"})["thread_id"]
        assert b.threads.get(thread_id)["metadata"] == {"owner": "a"}
        run = a.runs.create(thread_id, "agent", input=_input("ticker"))
        assert b.runs.get(thread_id, run["run_id"])["run_id"] == run["run_id"]
        ticks = []
        for part in b.runs.join_stream(thread_id, run["run_id"], stream_mode="custom"):
            if part.event == "custom":
                ticks.append(part.data["tick"])
                release.touch()  # seen through B: let the run end
        assert ticks, "no event of the run reached the other process"
        assert ticks == sorted(ticks)
        result = b.runs.join(thread_id, run["run_id"])
        assert result["messages"][-1]["content"] == "done: released"
        assert b.runs.get(thread_id, run["run_id"])["status"] == "success"
        listed = b.runs.list(thread_id)
        assert [r["run_id"] for r in listed] == [run["run_id"]]


def test_a_run_on_one_process_is_cancelled_through_the_other(
    workers_pair: WorkersPair, release: Path
) -> None:
    url_a, url_b = workers_pair.a, workers_pair.b
    with get_sync_client(url=url_a, timeout=20) as a, get_sync_client(url=url_b, timeout=20) as b:
        thread_id = a.threads.create()["thread_id"]
        run = a.runs.create(thread_id, "agent", input=_input("blocker"))
        b.runs.cancel(thread_id, run["run_id"], wait=True)
        assert b.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
        assert a.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
        # The thread is free again, and its next run may go through the other process.
        assert b.threads.get(thread_id)["status"] == "idle"
        release.touch()
        done = b.runs.wait(thread_id, "agent", input=_input("ticker"))
        assert done["messages"][-1]["content"] == "done: released"


def test_a_client_leaving_a_stream_on_one_process_cancels_the_run_on_the_other(
    workers_pair: WorkersPair, release: Path
) -> None:
    url_a, url_b = workers_pair.a, workers_pair.b
    with get_sync_client(url=url_a, timeout=20) as a, get_sync_client(url=url_b, timeout=20) as b:
        thread_id = a.threads.create()["thread_id"]
        run = a.runs.create(thread_id, "agent", input=_input("ticker"))  # never released
        stream = b.runs.join_stream(
            thread_id, run["run_id"], stream_mode="custom", cancel_on_disconnect=True
        )
        for part in stream:
            if part.event == "custom":
                break  # leave: the connection to B closes
        stream.close()
        a.runs.join(thread_id, run["run_id"])
        assert a.runs.get(thread_id, run["run_id"])["status"] == "interrupted"


def test_runs_db_must_be_postgres(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        create_app(blocking_agent(Probe()), runs_db=str(tmp_path / "x.db"))


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_serve_workers_share_runs_on_one_port(loop: str, tmp_path: Path, postgres_dsn: str) -> None:
    (tmp_path / "workers_agent.py").write_text(AGENT_MODULE)
    args = ["workers_agent:agent", "--db", postgres_dsn, "--loop", loop, "--workers", "2"]
    with serving(args, tmp_path) as url:
        # A connection per request, so requests reach either process: every
        # one must find the thread and runs made through the other.
        def client() -> SyncLangGraphClient:
            return get_sync_client(url=url, timeout=20)

        with client() as c:
            thread_id = c.threads.create()["thread_id"]
        for _ in range(3):
            with client() as c:
                run = c.runs.create(thread_id, "agent", input=_input("blocker"))
            with client() as c:
                c.runs.cancel(thread_id, run["run_id"], wait=True)
            with client() as c:
                assert c.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
        (tmp_path / "release").touch()
        with client() as c:
            done = c.runs.wait(thread_id, "agent", input=_input("ticker"))
        assert done["messages"][-1]["content"] == "done: released"


@pytest.mark.parametrize("threads", ["postgres", "sqlite"])
def test_runs_of_a_killed_process_end_as_lost_and_its_thread_resumes_elsewhere(
    threads: str, tmp_path: Path, postgres_dsn: str
) -> None:
    # Threads in PostgreSQL (the advisory lock ends with A's connection), or in
    # one SQLite file beside a runs database (A's lease row names a dead pid).
    (tmp_path / "workers_agent.py").write_text(AGENT_MODULE)
    if threads == "postgres":
        args = ["workers_agent:agent", "--db", postgres_dsn]
    else:
        args = ["workers_agent:agent", "--db", str(tmp_path / "threads.db")]
        args += ["--runs-db", postgres_dsn]
    with serve_processes([args, args], tmp_path) as ((url_a, process_a), (url_b, _)):
        with get_sync_client(url=url_a, timeout=20) as a:
            thread_id = a.threads.create()["thread_id"]
            # Streamed from its start (a join after runs.create could miss the one
            # update before the tool blocks, and then wait for ever), and left
            # running when this client stops reading.
            run_id = ""
            for part in a.runs.stream(
                thread_id,
                "agent",
                input=_input("blocker"),
                stream_mode="updates",
                on_disconnect="continue",
            ):
                if part.event == "metadata":
                    run_id = part.data["run_id"]
                if part.event == "updates":
                    break  # the run is under way in A
            run = {"run_id": run_id}
        process_a.kill()
        process_a.wait()
        with get_sync_client(url=url_b, timeout=20) as b:
            result = b.runs.join(thread_id, run["run_id"])
            assert result["__error__"]["error"] == "WorkerLost"
            assert b.runs.get(thread_id, run["run_id"])["status"] == "error"
            # The thread's lease died with A: B runs it on from its checkpoint.
            (tmp_path / "release").touch()
            done = b.runs.wait(thread_id, "agent", input=_input("ticker"))
            assert done["messages"][-1]["content"] == "done: released"
            assert [m["content"] for m in done["messages"] if m["type"] == "human"] == [
                "blocker",
                "ticker",
            ]

"""Resumable streams across server processes: ``Last-Event-ID`` on any of them.

Two ``deepactors serve`` processes share runs through one PostgreSQL database,
as the workers of ``serve --workers`` do (two ports here, so that each request
goes to the process the test means). A run streamed resumably through one is
rejoined through the other with the real ``langgraph-sdk`` client: the frames
after the id, then the live ones, the same ids and data as the owner's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from .serve_process import serve_process, serve_processes, serving
from .workers_pair import AGENT_MODULE, WorkersPair
from .workers_pair import release as release
from .workers_pair import workers_pair as workers_pair

_INPUT: dict[str, Any] = {"messages": [{"role": "user", "content": "ticker"}]}
_BODY = {
    "assistant_id": "agent",
    "input": _INPUT,
    "stream_mode": ["values", "custom"],
    "stream_resumable": True,
    "on_disconnect": "continue",
}


def _args(loop: str, dsn: str, *more: str) -> list[str]:
    return ["workers_agent:agent", "--db", dsn, "--loop", loop, *more]


@pytest.fixture(params=["asyncio", "trio"])
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "workers_agent.py").write_text(AGENT_MODULE)
    return tmp_path


def _started(url: str, thread_id: str, frames: int) -> tuple[str, list[tuple[str, str]]]:
    """Start a resumable run through ``url``; read ``frames`` frames, then drop the
    connection (the run goes on). Returns the run's id and the (id, event) seen."""
    seen: list[tuple[str, str]] = []
    with httpx.stream(
        "POST", f"{url}/threads/{thread_id}/runs/stream", json=_BODY, timeout=20
    ) as answer:
        assert answer.status_code == 200, answer.read()
        run_id = answer.headers["content-location"].rsplit("/", 1)[-1]
        fields: dict[str, str] = {}
        for line in answer.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif fields:
                seen.append((fields["id"], fields["event"]))
                fields = {}
                if len(seen) == frames:
                    break
    return run_id, seen


def _joined(
    client: SyncLangGraphClient, thread_id: str, run_id: str, last: str
) -> list[tuple[str | None, str, Any]]:
    parts = client.runs.join_stream(thread_id, run_id, last_event_id=last)
    return [(p.id, p.event, p.data) for p in parts]


def test_a_stream_dropped_on_one_process_is_picked_up_on_the_other(
    workers_pair: WorkersPair, release: Path
) -> None:
    url_a, url_b = workers_pair.a, workers_pair.b
    with (
        get_sync_client(url=url_a, timeout=20) as a,
        get_sync_client(url=url_b, timeout=20) as b,
    ):
        thread_id = a.threads.create()["thread_id"]
        run_id, seen = _started(url_a, thread_id, 4)
        # Through B, from the last id A sent: the frames missed, then the live
        # ones; the run is let go once B has followed it a while.
        rest: list[tuple[str | None, str, Any]] = []
        for part in b.runs.join_stream(thread_id, run_id, last_event_id=seen[-1][0]):
            rest.append((part.id, part.event, part.data))
            if len(rest) == 10:
                release.touch()
        ids = [int(i) for i, _, _ in rest if i is not None]
        assert ids == list(range(len(seen), len(seen) + len(ids)))
        assert len(ids) == len(rest)  # every frame has its id
        final = [data for _, event, data in rest if event == "values"][-1]
        assert final["messages"][-1]["content"] == "done: released"
        # The whole stream, from either process, is the one A kept.
        whole_a = _joined(a, thread_id, run_id, "-1")
        whole_b = _joined(b, thread_id, run_id, "-1")
        assert whole_b == whole_a
        assert [(i, e) for i, e, _ in whole_a] == seen + [(i, e) for i, e, _ in rest]
        assert _joined(b, thread_id, run_id, rest[2][0] or "") == whole_a[len(seen) + 3 :]


def test_a_background_run_is_joined_from_its_first_event_on_another_process(
    workers_pair: WorkersPair, release: Path
) -> None:
    release.touch()  # the run ends at once
    url_a, url_b = workers_pair.a, workers_pair.b
    with (
        get_sync_client(url=url_a, timeout=20) as a,
        get_sync_client(url=url_b, timeout=20) as b,
    ):
        thread_id = a.threads.create()["thread_id"]
        run = a.runs.create(
            thread_id, "agent", input=_INPUT, stream_mode="values", stream_resumable=True
        )
        a.runs.join(thread_id, run["run_id"])
        parts = _joined(b, thread_id, run["run_id"], "-1")
        assert parts[0][:2] == ("0", "metadata")
        assert parts[-1][2]["messages"][-1]["content"] == "done: released"
        assert parts == _joined(a, thread_id, run["run_id"], "-1")


def test_the_owner_dying_ends_a_rejoined_stream_with_worker_lost(
    workers_pair: WorkersPair, release: Path
) -> None:
    # A process of its own for the owner (it is killed), and the module's B; the
    # release file is absent (the fixture removed it): the run is never released.
    url_b = workers_pair.b
    with (
        serve_process(workers_pair.args(), workers_pair.folder) as (url_a, process_a),
        get_sync_client(url=url_b, timeout=30) as b,
    ):
        thread_id = b.threads.create()["thread_id"]
        run_id, seen = _started(url_a, thread_id, 3)  # never released
        stream = b.runs.join_stream(thread_id, run_id, last_event_id=seen[-1][0])
        parts: list[tuple[str | None, str, Any]] = []
        for part in stream:
            parts.append((part.id, part.event, part.data))
            if len(parts) == 3:
                process_a.kill()  # mid-run: B's copy of its log has no end
        assert parts[-1][1] == "error"
        assert parts[-1][2]["error"] == "WorkerLost"
        ids = [int(i) for i, _, _ in parts if i is not None]
        assert ids == list(range(len(seen), len(seen) + len(parts)))


def test_a_run_keeps_its_last_events_and_says_when_older_ones_are_asked_for(
    loop: str, folder: Path, postgres_dsn: str
) -> None:
    args = _args(loop, postgres_dsn, "--stream-log-bytes", "4000")
    with (
        serve_processes([args, args], folder) as ((url_a, _), (url_b, _)),
        get_sync_client(url=url_a, timeout=20) as a,
        get_sync_client(url=url_b, timeout=20) as b,
    ):
        thread_id = a.threads.create()["thread_id"]
        run_id, _ = _started(url_a, thread_id, 200)  # far more than 4,000 bytes
        (folder / "release").touch()
        a.runs.join(thread_id, run_id)
        for client, url in ((a, url_a), (b, url_b)):
            refused = httpx.get(
                f"{url}/threads/{thread_id}/runs/{run_id}/stream",
                headers={"Last-Event-ID": "-1"},
                timeout=20,
            )
            assert refused.status_code == 410, refused.text
            detail = refused.json()["detail"]
            assert "are no longer kept" in detail
            assert "at most 4000 bytes" in detail
            first = int(detail.split("events before id ")[1].split()[0])
            kept = _joined(client, thread_id, run_id, str(first - 1))
            assert kept[0][0] == str(first)
            assert kept[-1][2]["messages"][-1]["content"] == "done: released"
            assert sum(len(str(data)) for _, _, data in kept) < 8000
        assert _joined(a, thread_id, run_id, str(first - 1)) == kept


def test_rejoins_reaching_either_worker_of_serve_workers_get_the_same_stream(
    loop: str, folder: Path, postgres_dsn: str
) -> None:
    # One port, two worker processes: each request on a new connection may
    # reach either; every rejoin gets the frames after its id, then the rest.
    args = _args(loop, postgres_dsn, "--workers", "2")
    with serving(args, folder) as url:
        fresh = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(base_url=url, limits=fresh, timeout=20) as http:
            thread_id = http.post("/threads", json={}).json()["thread_id"]
        run_id, seen = _started(url, thread_id, 3)
        tails: list[list[tuple[str | None, str, Any]]] = [[]]
        with get_sync_client(url=url, timeout=20) as client:
            for part in client.runs.join_stream(thread_id, run_id, last_event_id=seen[-1][0]):
                tails[0].append((part.id, part.event, part.data))
                if len(tails[0]) == 5:
                    (folder / "release").touch()  # followed live a while: let it end
        for _ in range(3):
            with get_sync_client(url=url, timeout=20) as client:
                tails.append(_joined(client, thread_id, run_id, seen[-1][0]))
        assert all(tail == tails[0] for tail in tails)
        assert tails[0][0][0] == str(len(seen))
        assert tails[0][-1][2]["messages"][-1]["content"] == "done: released"

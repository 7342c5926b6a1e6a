"""``deepactors serve --loop trio --workers 2`` keeps its workers running.

A real server process over 127.0.0.1: one of its worker processes is killed
(SIGKILL), the other keeps answering and a new worker takes the dead one's
place; SIGTERM then stops the server (exit status 0) and every worker with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from deepactors.server._supervise import MAX_RESTARTS
from tests.waiting import wait_until_sync

from .serve_process import serve_process
from .test_workers import AGENT_MODULE

pytestmark = pytest.mark.slow


def _workers(pid: int) -> set[int]:
    """The worker processes among ``pid``'s children (not multiprocessing's
    resource tracker, which is a child too)."""
    children: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children.update(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended since it was listed
    workers = set()
    for child in children:
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            # Gone since it was listed: its /proc entry vanished, or it is
            # still there for a process already dead (ESRCH on reading).
            continue
        if b"spawn_main" in cmdline:
            workers.add(child)
    return workers


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_killed_trio_worker_is_replaced_and_sigterm_stops_all(
    tmp_path: Path, postgres_dsn: str
) -> None:
    (tmp_path / "workers_agent.py").write_text(AGENT_MODULE)
    args = ["workers_agent:agent", "--db", postgres_dsn, "--loop", "trio", "--workers", "2"]
    with serve_process(args, tmp_path) as (url, server):
        wait_until_sync(lambda: len(_workers(server.pid)) == 2, what="two workers")
        before = _workers(server.pid)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        wait_until_sync(lambda: victim not in _workers(server.pid), what="the killed worker reaped")
        # The other worker serves meanwhile (a connection per request).
        for _ in range(5):
            assert httpx.get(f"{url}/ok").status_code == 200
        wait_until_sync(lambda: len(_workers(server.pid)) == 2, what="a new worker")
        after = _workers(server.pid)
        assert victim not in after
        assert before - {victim} < after
        assert server.poll() is None
        wait_until_sync(lambda: _answers_twice(url), what="the new worker answering")

        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0
        assert not any(_alive(pid) for pid in after)
    log = next(tmp_path.glob("serve-*.log")).read_text()
    assert f"pid={victim}" in log
    assert "exitcode=-9" in log


def _answers_twice(url: str) -> bool:
    try:
        return all(httpx.get(f"{url}/ok").status_code == 200 for _ in range(2))
    except httpx.TransportError:
        return False


def test_workers_that_keep_dying_make_the_server_give_up(tmp_path: Path, postgres_dsn: str) -> None:
    (tmp_path / "workers_agent.py").write_text(AGENT_MODULE)
    # Not serve_process: it requires a clean exit, and this one must fail. No
    # need to wait for /ok either: workers are killed as soon as they exist.
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deepactors",
            "serve",
            "workers_agent:agent",
            "--db",
            postgres_dsn,
            "--loop",
            "trio",
            "--workers",
            "2",
            "--port",
            "0",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        killed: set[int] = set()
        seen: set[int] = set()
        # One more death than the restarts allowed.
        while len(killed) <= MAX_RESTARTS:
            wait_until_sync(lambda: bool(_workers(server.pid) - killed), what="a worker to kill")
            seen |= _workers(server.pid)
            victim = min(seen - killed)
            os.kill(victim, signal.SIGKILL)
            killed.add(victim)
        _, stderr = server.communicate(timeout=20)
        assert server.returncode == 1, stderr
        assert b"giving up" in stderr
        assert not any(_alive(pid) for pid in seen)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stderr is not None:  # communicate closed it, if it was reached
            server.stderr.close()

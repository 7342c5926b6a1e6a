"""Kill a process mid fan-out with SIGKILL; resume the thread in a new process.

On a SQLite file and on a PostgreSQL database (where the killed process's lease,
an advisory lock, ends with its connection).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from deepactors.persistence import is_postgres_url
from tests.waiting import wait_until_sync

AGENT = Path(__file__).with_name("crash_agent.py")

_FINISHED = "SELECT count(*) FROM checkpoint_records WHERE path = 'main' AND kind = 'tool_result'"


def run_agent(mode: str, db: str, log: Path, loop: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, str(AGENT), mode, db, str(log), loop],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def finished_children(db: str) -> int:
    """Children whose result the parent has checkpointed."""
    if is_postgres_url(db):
        try:
            with psycopg.connect(db, autocommit=True) as conn:
                row = conn.execute(_FINISHED).fetchone()
        except psycopg.errors.UndefinedTable:  # the table is not there yet
            return 0
        assert row is not None
        return int(row[0])
    if not Path(db).exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            found = conn.execute(_FINISHED).fetchone()
    except sqlite3.OperationalError:  # the table is not there yet
        return 0
    return int(found[0])


@pytest.fixture(params=["sqlite", "postgres"])
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """Makes a fresh database of the kind for a name: a file, or a PostgreSQL database."""
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        return lambda _: server.new_database()  # type: ignore[no-any-return]
    return lambda name: str(tmp_path / f"{name}.db")


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_sigkill_mid_fan_out_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, loop: str, databases: Callable[[str], str]
) -> None:
    db, log = databases("threads"), tmp_path / "calls.log"
    proc = subprocess.Popen(
        [sys.executable, str(AGENT), "first", db, str(log), loop],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def fast_ones_finished() -> bool:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            return finished_children(db) >= 10

        wait_until_sync(fast_ones_finished, what="the fast children finished", timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    # The killed process held the thread's lease: the resume must not wait it out.
    started = time.monotonic()
    resumed = run_agent("resume", db, log, loop)
    assert time.monotonic() - started < 60
    clean = run_agent("clean", databases("clean"), tmp_path / "clean.log", loop)

    calls = log.read_text().splitlines()
    resumed_calls = [c.split()[-1] for c in calls if c.startswith("resume")]
    # Finished children were not asked again; each stopped one finished its two turns.
    assert not [c for c in resumed_calls if c.startswith("fast")]
    assert sorted(resumed_calls) == sorted([f"slow{i}" for i in range(10)] * 2)
    assert resumed["files"] == clean["files"]
    assert len(resumed["files"]) == 20  # type: ignore[arg-type]
    assert resumed["messages"] == clean["messages"]

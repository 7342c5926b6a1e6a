"""Kill a process mid fan-out with SIGKILL; resume the thread in a new process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

AGENT = Path(__file__).with_name("crash_agent.py")


def run_agent(mode: str, db: Path, log: Path, loop: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, str(AGENT), mode, str(db), str(log), loop],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def finished_children(db: Path) -> int:
    """Children whose result the parent has checkpointed."""
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            row = conn.execute(
                "SELECT count(*) FROM checkpoint_records"
                " WHERE path = 'main' AND kind = 'tool_result'"
            ).fetchone()
    except sqlite3.OperationalError:  # the table is not there yet
        return 0
    return int(row[0])


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_sigkill_mid_fan_out_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, loop: str
) -> None:
    db, log = tmp_path / "threads.db", tmp_path / "calls.log"
    proc = subprocess.Popen(
        [sys.executable, str(AGENT), "first", str(db), str(log), loop],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while finished_children(db) < 10:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the fast children never finished"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    resumed = run_agent("resume", db, log, loop)
    clean = run_agent("clean", tmp_path / "clean.db", tmp_path / "clean.log", loop)

    calls = log.read_text().splitlines()
    resumed_calls = [c.split()[-1] for c in calls if c.startswith("resume")]
    # Finished children were not asked again; each stopped one finished its two turns.
    assert not [c for c in resumed_calls if c.startswith("fast")]
    assert sorted(resumed_calls) == sorted([f"slow{i}" for i in range(10)] * 2)
    assert resumed["files"] == clean["files"]
    assert len(resumed["files"]) == 20  # type: ignore[arg-type]
    assert resumed["messages"] == clean["messages"]

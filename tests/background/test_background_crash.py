"""A SIGKILL while background tasks run, and the thread resumed in another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

APP = Path(__file__).with_name("crash_app.py")


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_finished_tasks_are_not_run_again_and_unfinished_ones_restart(
    tmp_path: Path, loop: str
) -> None:
    db, log = tmp_path / "threads.db", tmp_path / "calls.log"
    proc = subprocess.Popen(
        [sys.executable, str(APP), "first", str(db), str(log), loop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the fast two are folded in
        assert line.strip() == b"READY", (proc.stderr.read() if proc.stderr else b"").decode()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    assert proc.returncode == -signal.SIGKILL

    done = subprocess.run(
        [sys.executable, str(APP), "resume", str(db), str(log), loop],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)

    calls = log.read_text().splitlines()
    resumed = sorted(c.split()[1] for c in calls if c.startswith("resume"))
    # alpha and beta finished before the kill: never asked again. The three
    # that hung were started again from their briefs and ran their two turns.
    assert resumed == sorted(["gamma", "gamma", "delta", "delta", "epsilon", "epsilon"])
    assert out["statuses"] == dict.fromkeys(
        ["alpha", "beta", "gamma", "delta", "epsilon"], "success"
    )
    results = sorted(c["result"] for c in out["checks"])
    assert results == sorted(
        [
            "report on alpha (first)",
            "report on beta (first)",
            "report on gamma (resume)",
            "report on delta (resume)",
            "report on epsilon (resume)",
        ]
    )
    assert out["files"] == sorted(
        f"/notes/{t}.md" for t in ["alpha", "beta", "gamma", "delta", "epsilon"]
    )
    restarted = [n for n in out["notices"] if "started again" in n]
    assert len(restarted) == 3

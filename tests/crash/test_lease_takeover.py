"""A process killed while it holds a thread: the next run does not wait for an expiry."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from deepactors.errors import ThreadBusy
from deepactors.persistence import PostgresCheckpointer, SqliteCheckpointer
from tests.waiting import wait_until_sync

HOLDER = Path(__file__).with_name("lease_holder.py")


async def take(db: Path) -> float:
    """Take thread ``t`` without waiting (ThreadBusy if held); return the seconds it took."""
    started = time.monotonic()
    async with SqliteCheckpointer(db, when_busy="raise") as cp, cp.lease("t"):
        pass
    return time.monotonic() - started


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
@pytest.mark.parametrize(
    "reaped",
    [
        pytest.param(True, id="reaped"),
        pytest.param(
            False,
            id="zombie",
            marks=pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc"),
        ),
    ],
)
def test_a_killed_holder_frees_its_thread_at_once(tmp_path: Path, loop: str, reaped: bool) -> None:
    db = tmp_path / "threads.db"
    proc = subprocess.Popen(
        [sys.executable, str(HOLDER), str(db), loop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(ThreadBusy) as info:
            anyio.run(take, db)
        assert f"pid {proc.pid} on " in info.value.holder
        os.kill(proc.pid, signal.SIGKILL)
        if reaped:
            proc.wait()
        else:
            # Killed but not yet waited for: a zombie still owns its pid.
            wait_until_sync(lambda: _is_zombie(proc.pid), what="the killed holder a zombie")
        # Its lease had 10 minutes to run; the dead pid frees it now.
        assert anyio.run(take, db) < 5
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _is_zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


async def take_postgres(dsn: str, *, wait: bool) -> float:
    """Take thread ``t`` of a PostgreSQL database; return the seconds it took."""
    started = time.monotonic()
    with anyio.fail_after(20):
        async with (
            PostgresCheckpointer(dsn, when_busy="wait" if wait else "raise") as cp,
            cp.lease("t"),
        ):
            pass
    return time.monotonic() - started


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_a_killed_postgres_holder_frees_its_thread_with_its_connection(
    postgres_dsn: str, loop: str
) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(HOLDER), postgres_dsn, loop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(ThreadBusy) as info:
            anyio.run(functools.partial(take_postgres, postgres_dsn, wait=False))
        assert f"pid {proc.pid} on " in info.value.holder
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # No expiry: the server ends the dead process's session, and its lock.
        assert anyio.run(functools.partial(take_postgres, postgres_dsn, wait=True)) < 5
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

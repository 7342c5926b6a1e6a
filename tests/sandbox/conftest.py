"""Fixtures for the sandbox suite: real bubblewrap, checked once; skipped only when it cannot run.

Workspaces live under a folder of ``/tmp`` that every user can search: when the
tests run as root, the sandbox runs commands as ``nobody``, which must reach it
(pytest's own ``tmp_path`` sits under a folder only root may enter).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest


@functools.cache
def _bwrap_unusable() -> str | None:
    """Why bubblewrap cannot run here, or None (asked once per session)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "true"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


@pytest.fixture(autouse=True)
def _needs_bwrap(request: pytest.FixtureRequest) -> None:
    """Skip, saying why, when bubblewrap cannot run (tests of that case excepted)."""
    if request.node.name.startswith("test_unavailable"):
        return
    reason = _bwrap_unusable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""


@pytest.fixture
def sandbox_root() -> Iterator[Path]:
    """A folder for workspaces, reachable by any user; removed after the test."""
    base = tempfile.mkdtemp(prefix="deepactors-sandbox-test-")
    os.chmod(base, 0o755)
    try:
        yield Path(base) / "ws"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host folder outside every workspace, with secrets planted in it."""
    base = Path(tempfile.mkdtemp(prefix="deepactors-sandbox-host-"))
    os.chmod(base, 0o755)
    (base / ".ssh").mkdir()
    (base / ".ssh" / "id_ed25519").write_text("PLANTED-SSH-KEY\n")
    (base / ".ssh" / "id_ed25519").chmod(0o644)  # readable by anyone who can see it
    (base / "shadow").write_text("root:PLANTED-HASH:19000:0:99999:7:::\n")
    (base / "shadow").chmod(0o644)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _processes_with(marker: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != b"Z":
            found.append(int(name))
    return found


async def alive(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds ``marker`` (counted from the host)."""
    return await anyio.to_thread.run_sync(_processes_with, marker.encode())

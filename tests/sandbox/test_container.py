"""ContainerSandbox on a real Docker or Podman, where one runs; skipped, saying why, elsewhere.

The image is ``DEEPACTORS_TEST_IMAGE`` (default ``debian:bookworm-slim``); it must
already be on the machine (the sandbox never pulls).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from deepactors.backends import ContainerSandbox, SandboxKey, SandboxLimits, sandbox_scope
from deepactors.errors import FileNotFound, PathOutsideRoot, SandboxUnavailable

pytestmark = pytest.mark.anyio

IMAGE = os.environ.get("DEEPACTORS_TEST_IMAGE", "debian:bookworm-slim")


def _engine() -> str | None:
    return shutil.which("podman") or shutil.which("docker")


@functools.cache
def _engine_unusable() -> str | None:
    engine = _engine()
    if engine is None:
        return "no container engine (docker or podman) is installed"
    info = subprocess.run([engine, "info"], capture_output=True, text=True, check=False)
    if info.returncode != 0:
        return f"{engine} cannot reach its daemon: {info.stderr.strip()[:200]}"
    image = subprocess.run(
        [engine, "image", "inspect", IMAGE], capture_output=True, text=True, check=False
    )
    if image.returncode != 0:
        return (
            f"the test image {IMAGE} is not on this machine (pull it, or set DEEPACTORS_TEST_IMAGE)"
        )
    return None


def _ours_running() -> list[str]:
    engine = _engine()
    assert engine is not None
    listed = subprocess.run(
        [engine, "ps", "-aq", "--filter", "name=deepactors-"],
        capture_output=True,
        text=True,
        check=False,
    )
    return listed.stdout.split()


@pytest.fixture
async def sandbox(sandbox_root: Path) -> AsyncIterator[ContainerSandbox]:
    reason = _engine_unusable()
    if reason is not None:
        pytest.skip(reason)
    limits = SandboxLimits(processes=64, file_bytes=1 << 20, output_total_bytes=4 << 20)
    async with ContainerSandbox(sandbox_root, image=IMAGE, limits=limits, timeout=60) as sb:
        with sandbox_scope(SandboxKey("t-container", "mallory")):
            yield sb


async def test_unavailable_container_engine_says_why(sandbox_root: Path) -> None:
    if _engine() is None:
        sandbox = ContainerSandbox(sandbox_root, image=IMAGE, engine="deepactors-no-engine")
        match = "not installed"
    elif _engine_unusable() is not None and "daemon" in (_engine_unusable() or ""):
        sandbox = ContainerSandbox(sandbox_root, image=IMAGE)
        match = "cannot reach its daemon"
    else:
        sandbox = ContainerSandbox(sandbox_root, image="deepactors-no-such-image:never")
        match = "not on this machine"
    with pytest.raises(SandboxUnavailable, match=match):
        async with sandbox:
            pass
    with pytest.raises(SandboxUnavailable), sandbox_scope(SandboxKey("t")):
        await sandbox.execute("true")


async def test_writes_reads_env_and_network_are_contained(
    sandbox: ContainerSandbox, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-PLANTED-SECRET")
    result = await sandbox.execute(
        f"echo x > /evil 2>&1; echo x > /usr/evil 2>&1; cat {outside}/shadow 2>&1; env; "
        "cat /proc/1/environ; echo ok > inside.txt; (exec 3<>/dev/tcp/1.1.1.1/80) 2>&1; "
        "getent hosts example.com || echo no-dns; echo end"
    )
    assert "PLANTED" not in result.output
    assert result.output.strip().endswith("end")
    assert not (outside / "evil").exists()
    assert (await sandbox.read("/inside.txt")).text == "ok"


async def test_timeouts_and_background_processes_leave_no_container(
    sandbox: ContainerSandbox,
) -> None:
    result = await sandbox.execute("sleep 1000 & sleep 1000", timeout=2)
    assert result.timed_out
    result = await sandbox.execute("sleep 1000 & echo started")
    assert result.output.strip() == "started"
    with anyio.move_on_after(2):
        await sandbox.execute("sleep 1000")
    assert await anyio.to_thread.run_sync(_ours_running) == []


async def test_a_fork_bomb_stops_at_the_process_limit(sandbox: ContainerSandbox) -> None:
    result = await sandbox.execute("bomb() { bomb | bomb & }; bomb; sleep 1; echo survived")
    assert "survived" in result.output
    assert await anyio.to_thread.run_sync(_ours_running) == []


async def test_planted_links_and_other_threads(sandbox: ContainerSandbox) -> None:
    await sandbox.write("/secret.txt", "MINE\n")
    await sandbox.execute("ln -s /etc/passwd pw; echo made > made.txt")
    with pytest.raises(PathOutsideRoot):
        await sandbox.read("/pw")
    assert (await sandbox.read("/made.txt")).text == "made"
    with sandbox_scope(SandboxKey("t-other", "mallory")):
        result = await sandbox.execute("ls -A; cat ../*/secret.txt 2>&1; echo end")
        assert "MINE" not in result.output
        with pytest.raises(FileNotFound):
            await sandbox.read("/secret.txt")

"""The workspace from both sides: tools' writes usable inside; odd files commands leave."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from deepactors.backends import BubblewrapSandbox, SandboxKey, sandbox_scope
from deepactors.errors import PathOutsideRoot, SpecialFile

pytestmark = pytest.mark.anyio


@pytest.fixture
async def sandbox(sandbox_root: Path) -> AsyncIterator[BubblewrapSandbox]:
    async with BubblewrapSandbox(sandbox_root, timeout=20) as sb:
        with sandbox_scope(SandboxKey("t-ws")):
            yield sb


async def test_files_written_by_the_tools_can_be_changed_by_commands(
    sandbox: BubblewrapSandbox,
) -> None:
    await sandbox.write("/a/b/c.txt", "one\n")
    await sandbox.append("/a/log.txt", "x\n")
    result = await sandbox.execute(
        "echo two >> a/b/c.txt && mkdir a/b/d && echo y >> a/log.txt; echo status=$?"
    )
    assert result.output.strip() == "status=0"
    assert (await sandbox.read("/a/b/c.txt")).text == "one\ntwo"
    assert (await sandbox.read("/a/log.txt")).text == "x\ny"
    # And the other way: what a command made, the tools edit.
    await sandbox.execute("printf 'made inside\\n' > inside.txt")
    window = await sandbox.read("/inside.txt")
    await sandbox.edit("/inside.txt", "inside", "here", expected_version=window.version)
    assert (await sandbox.execute("cat inside.txt")).output == "made here\n"


async def test_a_fifo_left_by_a_command_never_blocks_the_tools(sandbox: BubblewrapSandbox) -> None:
    await sandbox.execute("mkfifo pipe")
    with anyio.fail_after(10), pytest.raises(SpecialFile):
        await sandbox.read("/pipe")
    with anyio.fail_after(10):
        assert (await sandbox.grep("x", path="/")).matches == ()


async def test_hard_links_to_host_files_cannot_be_made(sandbox: BubblewrapSandbox) -> None:
    result = await sandbox.execute(
        "ln /usr/bin/env env-link 2>&1; ln /etc/ld.so.cache cache-link 2>&1; ls -A"
    )
    assert "Invalid cross-device link" in result.output  # another mount: never the host file
    assert {i.path for i in await sandbox.ls("/")} == set()


async def test_a_link_swapped_in_for_a_folder_is_refused(sandbox: BubblewrapSandbox) -> None:
    await sandbox.write("/docs/readme.md", "hello\n")
    await sandbox.execute("rm -r docs && ln -s /etc docs")
    with pytest.raises(PathOutsideRoot):
        await sandbox.read("/docs/ld.so.cache")
    with pytest.raises(PathOutsideRoot):
        await sandbox.write("/docs/evil", "x")
    assert await sandbox.glob("**/*") == []

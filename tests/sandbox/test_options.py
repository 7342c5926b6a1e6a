"""The sandbox's options: the network when allowed, paths made visible, env, a Python."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from deepactors.backends import BubblewrapSandbox
from deepactors.errors import ConfigurationError, SandboxUnavailable

pytestmark = pytest.mark.anyio


async def test_the_network_when_allowed(sandbox_root: Path) -> None:
    connections = 0

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal connections
        connections += 1
        await stream.aclose()

    async with (
        BubblewrapSandbox(sandbox_root, per_thread=False, network=True) as sandbox,
        await anyio.create_tcp_listener(local_host="127.0.0.1") as listener,
        anyio.create_task_group() as tg,
    ):
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.start_soon(listener.serve, serve)
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        result = await sandbox.execute(f'python3 -c "{probe}" && echo connected')
        tg.cancel_scope.cancel()
    assert result.output.strip() == "connected"
    assert connections == 1


async def test_listed_paths_are_visible_read_only(sandbox_root: Path, outside: Path) -> None:
    async with BubblewrapSandbox(sandbox_root, per_thread=False, paths=[str(outside)]) as sb:
        result = await sb.execute(
            f"cat {outside}/shadow; echo x > {outside}/new 2>&1 || echo refused; "
            f"rm {outside}/shadow 2>&1 || echo refused"
        )
    assert "PLANTED-HASH" in result.output
    assert result.output.count("refused") == 2
    assert (outside / "shadow").exists()
    assert not (outside / "new").exists()


async def test_a_python_outside_usr_is_made_visible_or_refused_saying_why(
    sandbox_root: Path,
) -> None:
    sandbox = BubblewrapSandbox(sandbox_root, per_thread=False, python=sys.executable)
    reachable = all(
        os.stat(p).st_mode & 0o001 for p in Path(sys.base_prefix).parents if str(p) != "/"
    )
    if os.geteuid() != 0 or reachable:
        async with sandbox:
            result = await sandbox.execute("python -c 'import sys; print(sys.version_info[:2])'")
        assert result.output.strip() == str(sys.version_info[:2])
    else:  # root runs commands as nobody, who cannot reach this Python
        with pytest.raises(SandboxUnavailable, match="bubblewrap cannot create"):
            async with sandbox:
                pass


async def test_unknown_tools_and_paths_are_configuration_errors(sandbox_root: Path) -> None:
    for options in (
        {"tools": ["deepactors-no-such-tool"]},
        {"paths": ["relative/path"]},
        {"paths": ["/"]},  # would bring the host's /proc and /tmp
        {"paths": ["/proc/self"]},
    ):
        sandbox = BubblewrapSandbox(sandbox_root, per_thread=False, **options)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            async with sandbox:
                pass


async def test_commands_as_this_processs_own_user(sandbox_root: Path) -> None:
    async with BubblewrapSandbox(sandbox_root, per_thread=False, run_as=None) as sandbox:
        await sandbox.write("/in.txt", "from the tools\n")
        result = await sandbox.execute("id -u; cat in.txt; echo made > out.txt")
        assert result.output.split("\n")[:2] == [str(os.getuid()), "from the tools"]
        assert (await sandbox.read("/out.txt")).text == "made"
    assert (sandbox_root / "out.txt").stat().st_uid == os.getuid()

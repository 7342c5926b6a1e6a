"""Hostile commands in a real bubblewrap sandbox: each escape is tried, and refused or contained.

After every command the host is checked: the planted files are untouched, and
no process the sandbox started is alive (counted from the host's ``/proc``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from deepactors.backends import BubblewrapSandbox, SandboxKey, SandboxLimits, sandbox_scope
from deepactors.errors import FileNotFound, PathOutsideRoot

from .conftest import alive

pytestmark = pytest.mark.anyio

KEY = SandboxKey("t-hostile", "mallory")


@pytest.fixture
async def sandbox(sandbox_root: Path) -> AsyncIterator[BubblewrapSandbox]:
    limits = SandboxLimits(
        processes=64, file_bytes=1 << 20, memory_bytes=512 << 20, output_total_bytes=4 << 20
    )
    async with BubblewrapSandbox(sandbox_root, limits=limits, timeout=20) as sb:
        with sandbox_scope(KEY):
            yield sb


async def test_writing_outside_the_workspace_is_refused(
    sandbox: BubblewrapSandbox, outside: Path
) -> None:
    targets = ["/usr/evil", "/etc/evil", "/evil", "/tmp/../evil", f"{outside}/evil"]
    script = "; ".join(f"echo x > {t} 2>/dev/null && echo WROTE {t}" for t in targets)
    result = await sandbox.execute(script + "; echo ok > /workspace/inside; echo end")
    assert "WROTE" not in result.output
    assert result.output.strip().endswith("end")
    assert not (outside / "evil").exists()
    assert (await sandbox.read("/inside")).text == "ok"


async def test_host_secrets_are_not_visible(sandbox: BubblewrapSandbox, outside: Path) -> None:
    server_files = os.getcwd()  # the server's own tree (its code, its venv)
    result = await sandbox.execute(
        f"cat {outside}/.ssh/id_ed25519 {outside}/shadow /etc/shadow /etc/passwd "
        "/root/.ssh/id_rsa /proc/1/root/etc/shadow 2>&1; ls /home /root 2>&1; "
        f"ls {server_files} 2>&1; echo end"
    )
    assert "PLANTED" not in result.output
    assert result.output.strip().endswith("end")
    assert "No such file" in result.output
    assert "pyproject" not in result.output


async def test_the_servers_environment_is_not_passed(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-PLANTED-SECRET")
    async with BubblewrapSandbox(sandbox_root, per_thread=False, env={"MINE": "given"}) as sb:
        result = await sb.execute("env; cat /proc/1/environ /proc/self/environ; echo")
    assert "PLANTED" not in result.output
    assert "MINE=given" in result.output


async def test_no_network_not_even_the_hosts_loopback(sandbox: BubblewrapSandbox) -> None:
    connections = 0

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal connections
        connections += 1
        await stream.aclose()

    async with (
        await anyio.create_tcp_listener(local_host="127.0.0.1") as listener,
        anyio.create_task_group() as tg,
    ):
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.start_soon(listener.serve, serve)
        probe = (
            "import socket\n"
            "for host in ('127.0.0.1', '1.1.1.1'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=2)\n"
            "        print('CONNECTED', host)\n"
            "    except OSError as e: print('refused', host, e)\n"
        )
        result = await sandbox.execute(f'python3 -c "{probe}"')
        tg.cancel_scope.cancel()
    assert "CONNECTED" not in result.output
    assert result.output.count("\nrefused") + result.output.startswith("refused") == 2
    assert connections == 0


async def test_a_fork_bomb_stops_at_the_process_limit(sandbox: BubblewrapSandbox) -> None:
    # The bomb's own "Cannot fork" errors go nowhere: how many there are depends on
    # the machine, and enough of them filled the captured output past its bound,
    # cutting off the "survived" this test looks for.
    result = await sandbox.execute(
        "bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 1.0071; echo survived", timeout=15
    )
    assert not result.timed_out
    assert "survived" in result.output
    assert await alive("sleep 1.0071") == []
    # The host keeps working: it still runs commands, in the sandbox and outside.
    assert (await sandbox.execute("echo fine")).output.strip() == "fine"


async def test_a_command_past_its_timeout_is_killed_with_its_children(
    sandbox: BubblewrapSandbox,
) -> None:
    result = await sandbox.execute("sleep 1000.0072 & sleep 1000.0073", timeout=0.5)
    assert result.timed_out
    assert result.exit_code is None
    assert await alive("1000.007") == []


async def test_nothing_left_in_the_background_outlives_the_call(
    sandbox: BubblewrapSandbox,
) -> None:
    result = await sandbox.execute(
        "sleep 1000.0074 & setsid sleep 1000.0075 & (sleep 1000.0076 &); "
        "nohup sleep 1000.0077 >/dev/null 2>&1 & echo started"
    )
    assert result.output.strip() == "started"
    assert result.exit_code == 0
    assert await alive("1000.007") == []


async def test_a_cancelled_call_leaves_nothing_running(sandbox: BubblewrapSandbox) -> None:
    with anyio.move_on_after(0.5):
        await sandbox.execute("sleep 1000.0078")
    assert await alive("1000.0078") == []


async def test_a_gigabyte_of_output_is_cut_and_the_command_killed(
    sandbox: BubblewrapSandbox,
) -> None:
    result = await sandbox.execute("head -c 1000000000 /dev/zero | tr '\\0' y; echo never")
    assert result.truncated
    assert "killed" in result.output
    assert "never" not in result.output
    assert len(result.output) < 200_000


async def test_a_file_past_the_size_limit_is_refused(
    sandbox: BubblewrapSandbox, sandbox_root: Path
) -> None:
    result = await sandbox.execute("head -c 5000000 /dev/zero > big; echo status=$?")
    assert "status=0" not in result.output
    assert (await sandbox.stat("/big")).size <= 1 << 20
    # /tmp is memory, and small: filling it fails too.
    result = await sandbox.execute("head -c 5000000 /dev/zero > /tmp/big; echo status=$?")
    assert "status=0" not in result.output


async def test_filling_the_workspace_past_its_limit_is_stopped(sandbox_root: Path) -> None:
    limits = SandboxLimits(file_bytes=1 << 20, workspace_bytes=8 << 20)
    async with BubblewrapSandbox(sandbox_root, per_thread=False, limits=limits) as sb:
        result = await sb.execute(
            "i=0; while :; do head -c 1000000 /dev/zero > f$i || exit 9; i=$((i+1)); "
            "sleep 0.01; done",
            timeout=60,
        )
        assert not result.timed_out
        assert "past its limit" in result.output
        # Nothing stops a command that does not grow it: deleting works.
        assert (await sb.execute("rm -f f*; echo cleared")).output.startswith("cleared")


async def test_cpu_time_is_limited(sandbox_root: Path) -> None:
    limits = SandboxLimits(cpu_seconds=1)
    async with BubblewrapSandbox(sandbox_root, per_thread=False, limits=limits) as sb:
        result = await sb.execute("while :; do :; done", timeout=60)
    assert not result.timed_out
    assert result.exit_code not in (0, None)


async def test_memory_is_limited(sandbox: BubblewrapSandbox) -> None:
    result = await sandbox.execute("python3 -c 'b = bytearray(1 << 30); print(\"GOT\")'")
    assert "MemoryError" in result.output
    assert "GOT" not in result.output


async def test_the_servers_processes_are_invisible(sandbox: BubblewrapSandbox) -> None:
    me = os.getpid()
    result = await sandbox.execute(
        f"kill -0 {me} 2>&1 || echo no-such-process; ls /proc/{me} 2>&1 | head -1; "
        "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        f'r = libc.ptrace(16, {me}, 0, 0); print("ptrace", r, os.strerror(ctypes.get_errno()))\'; '
        "ls /proc | grep -c '^[0-9]'"
    )
    assert "no-such-process" in result.output
    assert "ptrace -1 No such process" in result.output  # PTRACE_ATTACH: not there to attach
    assert "No such file" in result.output
    assert int(result.output.split()[-1]) < 10  # the sandbox's own few processes


async def test_planted_symlinks_are_not_followed_by_the_file_tools(
    sandbox: BubblewrapSandbox, outside: Path
) -> None:
    await sandbox.execute(
        f"ln -s /etc/passwd pw; ln -s ../../../../../../etc/passwd rel; "
        f"ln -s {outside}/.ssh ssh; ln -s {outside} dir; "
        "echo real > real.txt; ln -s /workspace/real.txt inside; ln -s real.txt near"
    )
    for path in ("/pw", "/rel", "/ssh/id_ed25519", "/dir/shadow"):
        with pytest.raises(PathOutsideRoot):
            await sandbox.read(path)
        with pytest.raises(PathOutsideRoot):
            await sandbox.write(path, "overwritten")
    assert (await sandbox.read("/inside")).text == "real"
    assert (await sandbox.read("/near")).text == "real"
    listed = {i.path for i in await sandbox.ls("/")}
    assert listed == {"/real.txt", "/inside", "/near"}
    assert "PLANTED" in (outside / ".ssh" / "id_ed25519").read_text()
    hits = await sandbox.grep("root|PLANTED", path="/")
    assert hits.matches == ()


async def test_threads_cannot_see_each_others_workspaces(sandbox_root: Path) -> None:
    async with BubblewrapSandbox(sandbox_root) as sb:
        with sandbox_scope(SandboxKey("t1", "alice")):
            await sb.write("/secret.txt", "ALICE-SECRET\n")
            await sb.execute("echo ALICE-MADE > made.txt")
        for other in (SandboxKey("t2", "alice"), SandboxKey("t1", "bob"), SandboxKey("t1")):
            with sandbox_scope(other):
                result = await sb.execute(
                    "ls -a /workspace; cat /workspace/../*/secret.txt 2>&1; "
                    "grep -rs ALICE / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr; "
                    "ln -s ../" + SandboxKey("t1", "alice").slug + "/secret.txt peek; echo end"
                )
                assert "ALICE" not in result.output
                with pytest.raises(FileNotFound):
                    await sb.read("/secret.txt")
                with pytest.raises(PathOutsideRoot):
                    await sb.read("/peek")
        with sandbox_scope(SandboxKey("t1", "alice")):
            assert (await sb.read("/made.txt")).text == "ALICE-MADE"

"""LocalShellBackend.execute: real subprocesses, process groups, caps and cancellation."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deepactors.backends import LocalShellBackend
from tests.waiting import wait_until

from .conftest import pid_alive


async def wait_dead(pid: int) -> None:
    # Another process's life has no event: polled.
    await wait_until(lambda: not pid_alive(pid), what=f"process {pid} dead", timeout=5)


async def _read(file: Path) -> str:
    path = anyio.Path(file)
    return (await path.read_text()).strip() if await path.exists() else ""


async def test_exit_code_and_merged_output(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path)
    result = await shell.execute("echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert sorted(result.output.splitlines()) == ["err", "out"]
    assert not result.truncated
    assert not result.timed_out


async def test_runs_in_root_with_a_minimal_environment(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path, env={"GREETING": "hello"})
    await shell.write("/data.txt", "payload\n")
    result = await shell.execute(
        'cat data.txt; echo "$GREETING"; pwd; echo "${SECRET_TOKEN-unset}"'
    )
    assert result.output.splitlines() == ["payload", "hello", str(tmp_path), "unset"]


async def test_output_is_capped_with_a_note(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path, max_output_bytes=1000)
    result = await shell.execute("yes abcdefghi | head -c 100000")
    assert result.truncated
    assert result.exit_code == 0
    head, _, note = result.output.partition("\n[output truncated")
    assert len(head) == 1000
    assert "first 1000 of 100000 bytes" in note


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path)
    with anyio.fail_after(10):
        result = await shell.execute("sleep 30 & echo $!; wait", timeout=0.5)
    assert result.timed_out
    assert result.exit_code is None
    assert "timed out after 0.5 seconds" in result.output
    grandchild = int(result.output.splitlines()[0])
    await wait_dead(grandchild)


async def test_cancelling_the_caller_kills_the_process_group(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path)
    pid_file = tmp_path / "pid"
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(shell.execute, "sleep 30 & echo $! > pid; wait")
            # The pid appears in a file another process writes: nothing to wait on.
            await wait_until(lambda: _read(pid_file), what="the pid written")
            tg.cancel_scope.cancel()
    grandchild = int(await _read(pid_file))
    await wait_dead(grandchild)


async def test_per_call_timeout_overrides_default(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path, timeout=0.2)
    slow = await shell.execute("sleep 0.5; echo done", timeout=5)
    assert (slow.output, slow.exit_code, slow.timed_out) == ("done\n", 0, False)
    with anyio.fail_after(5):
        cut = await shell.execute("sleep 5")
    assert cut.timed_out


@pytest.mark.parametrize("command", ["exit 0", "true"])
async def test_no_output(tmp_path: Path, command: str) -> None:
    result = await LocalShellBackend(tmp_path).execute(command)
    assert (result.output, result.exit_code) == ("", 0)


async def test_a_background_child_holding_the_output_does_not_fake_a_timeout(
    tmp_path: Path,
) -> None:
    shell = LocalShellBackend(tmp_path, timeout=5, output_grace=0.2)
    with anyio.fail_after(4):  # well before the 5 s timeout
        result = await shell.execute("sleep 30 & echo $!; exit 7")
    assert not result.timed_out
    assert result.exit_code == 7
    assert result.output.startswith(result.output.splitlines()[0] + "\n")
    assert "background processes it started still held its output" in result.output
    await wait_dead(int(result.output.splitlines()[0]))


async def test_a_redirected_background_child_is_not_waited_for(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path, timeout=5)
    with anyio.fail_after(4):
        result = await shell.execute("sleep 0.3 > /dev/null 2>&1 & echo done")
    assert (result.output, result.exit_code, result.timed_out) == ("done\n", 0, False)

"""Running one sandboxed command: its output capped, its timeout kept, nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.to_thread
from anyio.abc import Process

from .._output import CappedOutput
from .._protocol import ExecuteResult

__all__ = ["run_contained"]

# How long to wait for the sandbox's init to be gone once killed: the kernel
# kills every process of a PID namespace when its init dies, at once.
_REAP_WAIT = 5.0
# How long a daemon may take to remove what the killed client started.
_KILL_WAIT = 30.0


def _child_pid(info_fd: int) -> int | None:
    """The host pid of the sandbox's init, from bwrap's ``--info-fd`` (never blocks)."""
    try:
        data = os.read(info_fd, 4096)
    except (BlockingIOError, OSError):
        return None
    try:
        pid = json.loads(data.decode()).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _kill_init(info_fd: int, parent: int) -> int | None:
    """Kill the sandbox's init (worker thread), if it is still ``parent``'s child.

    The parent check keeps a stale or reused pid from ever being signalled.
    """
    child = _child_pid(info_fd)
    if child is None:
        return None
    try:
        with open(f"/proc/{child}/stat", "rb") as f:
            ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
    if ppid != parent:
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(child, signal.SIGKILL)
    return child


def _wait_gone(pid: int) -> None:
    """Wait (worker thread) until ``pid`` has exited: gone, or a zombie.

    The init of a PID namespace exits only after every process in it is gone,
    so once it has, nothing the command started is alive.
    """
    deadline = _REAP_WAIT
    step = 0.002
    while deadline > 0:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return
        if state in (b"Z", b"X"):
            return
        time.sleep(step)  # a worker thread's wait, never the loop's
        deadline -= step
        step = min(step * 2, 0.05)


async def run_contained(
    argv: Sequence[str],
    *,
    timeout: float,
    output_bytes: int,
    output_total_bytes: int,
    info_fd: tuple[int, int] | None = None,
    on_kill: Callable[[], Awaitable[object]] | None = None,
    watchdog: Callable[[], Awaitable[str]] | None = None,
) -> ExecuteResult:
    """Run a sandbox's ``argv``; kill it (and so the whole sandbox) on timeout or cancellation.

    Args:
        argv: The whole command line (bwrap, or a container engine's client, first).
        timeout: Seconds before the sandbox is killed.
        output_bytes: Output kept; the rest is read and dropped.
        output_total_bytes: Output read in all before the sandbox is killed.
        info_fd: A pipe (read end, write end) whose write end bwrap got as
            ``--info-fd``: the read end tells the sandbox init's pid. Both are
            closed here.
        on_kill: Awaited (shielded) after a kill, for what killing the client
            process does not stop (a container run by a daemon).
        watchdog: Runs beside the command; when it returns (why), the command
            is killed and the reason is noted in the output.

    Another host user is taken by ``setpriv`` in ``argv``, not by
    ``subprocess``: a child that changes its uid is started with ``fork``
    instead of ``vfork``, which copies the server's page tables on the event
    loop's thread.
    """
    read_end, write_end = info_fd if info_fd is not None else (-1, -1)
    process = await _start(argv, read_end, write_end)
    output = CappedOutput(output_bytes)
    ending = _Ending()
    try:
        await _supervise(process, output, ending, timeout, output_total_bytes, watchdog)
    finally:
        kill = process.returncode is None or ending.flooded or ending.stopped is not None
        await _clean_up(process, read_end, kill=kill, on_kill=on_kill)
    text = output.text()
    if ending.flooded:
        text += (
            f"\n[the command wrote more than {output_total_bytes} bytes of output and was "
            "killed; redirect large output to a file and read or grep it]"
        )
    elif output.truncated:
        text += output.truncation_note()
    if ending.stopped is not None:
        text += f"\n[the command was killed: {ending.stopped}]"
    if ending.timed_out:
        text += f"\n[command timed out after {timeout:g} seconds and was killed]"
    return ExecuteResult(
        output=text,
        exit_code=None if ending.timed_out else process.returncode,
        truncated=output.truncated or ending.flooded,
        timed_out=ending.timed_out,
    )


async def _start(argv: Sequence[str], read_end: int, write_end: int) -> Process:
    """Start ``argv`` with its output piped; bwrap's ``--info-fd`` write end passed and closed.

    The read end is closed too when the start fails (else the caller closes it).
    """
    try:
        return await anyio.open_process(
            list(argv),
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # Not a session of its own (``start_new_session``): setsid makes
            # bubblewrap's start and exit ~12 ms slower, and is not needed: the
            # host side is one process (setpriv execs bwrap), and the sandbox's
            # processes die with its init (``--die-with-parent``), killed here too.
            pass_fds=() if write_end < 0 else (write_end,),
        )
    except BaseException:
        if read_end >= 0:
            os.close(read_end)
        raise
    finally:
        if write_end >= 0:
            os.close(write_end)  # bwrap has its copy; EOF once it closes it


@dataclass(slots=True)
class _Ending:
    """How a command's run ended, besides its exit: what ``_supervise`` saw."""

    flooded: bool = False  # wrote more than the total output allowed
    stopped: str | None = None  # the watchdog's reason
    timed_out: bool = False


async def _supervise(
    process: Process,
    output: CappedOutput,
    ending: _Ending,
    timeout: float,
    output_total_bytes: int,
    watchdog: Callable[[], Awaitable[str]] | None,
) -> None:
    """Read the output until the command exits, times out, floods or the watchdog stops it."""

    async def drain(scope: anyio.CancelScope) -> None:
        assert process.stdout is not None
        async for chunk in process.stdout:
            output.add(chunk)
            if output.total > output_total_bytes:
                ending.flooded = True
                scope.cancel()
                return

    async def watch(scope: anyio.CancelScope) -> None:
        assert watchdog is not None
        ending.stopped = await watchdog()
        scope.cancel()

    with anyio.move_on_after(timeout) as scope:
        async with anyio.create_task_group() as outer:
            if watchdog is not None:
                outer.start_soon(watch, scope)
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, scope)
                await process.wait()
            outer.cancel_scope.cancel()  # the watchdog, once the command is done
    ending.timed_out = scope.cancelled_caught and not ending.flooded and ending.stopped is None


async def _clean_up(
    process: Process,
    read_end: int,
    *,
    kill: bool,
    on_kill: Callable[[], Awaitable[object]] | None,
) -> None:
    """Kill the sandbox if ``kill``, then reap it (even while being cancelled), briefly."""
    child: int | None = None
    if kill:
        if read_end >= 0:
            with anyio.CancelScope(shield=True):
                child = await anyio.to_thread.run_sync(_kill_init, read_end, process.pid)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    # Reap even when our caller is being cancelled, briefly: after SIGKILL
    # every wait returns at once.
    with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP_WAIT):
        await process.aclose()
        if kill and child is not None:
            await anyio.to_thread.run_sync(_wait_gone, child)
    if kill and on_kill is not None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_WAIT):
            await on_kill()
    if read_end >= 0:
        os.close(read_end)

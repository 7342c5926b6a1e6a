"""``LocalShellBackend``: a disk folder plus shell commands run in it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping

import anyio

from deepactors.backends._filesystem import MIB, FilesystemBackend
from deepactors.backends._output import CappedOutput
from deepactors.backends._protocol import ExecuteResult

__all__ = ["LocalShellBackend"]

_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def _kill_group(pid: int) -> None:
    # The child leads its own session, so its pid is the process group's id: one
    # signal reaches every process it started, however deeply nested.
    with contextlib.suppress(ProcessLookupError, PermissionError):  # all gone already
        os.killpg(pid, signal.SIGKILL)


class LocalShellBackend(FilesystemBackend):
    """A :class:`FilesystemBackend` that also runs shell commands in its root.

    **This is not a security sandbox.** Commands run as the current user with
    ``sh -c``, can read and write anything that user can (``cd /`` works), use the
    network, and start programs. Only the *file* operations are confined to the
    root. Use it for trusted agents on a trusted machine, or inside a container.

    Each command runs in a new session (so a new process group) with its working
    folder at the root and stdin closed. When it runs past its timeout, or the
    caller is cancelled, the whole process group is killed with ``SIGKILL``: every
    child and grandchild that stayed in the group dies. A process that leaves the
    group on purpose (``setsid``, ``setpgid``, a daemonising double fork into a
    new session) is not reached and may survive; the backend does not track
    descendants beyond the group.

    When the shell exits while background processes it started still hold its
    output open (``sleep 30 & echo started``), the output is read for
    ``output_grace`` seconds more, then the group is killed and the shell's own
    exit code is reported, with a note. Background processes whose output is
    redirected elsewhere (``cmd > log 2>&1 &``) are not waited for and keep
    running after a normal exit.

    Args:
        root: The folder that is ``/`` and the commands' working folder
            (default: the current folder); ``root_dir=`` is deepagents' name for it.
        timeout: Default seconds a command may run.
        max_output_bytes: Output beyond this is dropped (still drained, so the
            command never blocks on a full pipe) and a note says so.
        output_grace: Seconds to keep reading output after the shell exits,
            while background processes it started still hold the output open;
            then those are killed (with the process group) and the shell's exit
            code is reported.
        env: Variables for the commands, on top of the base environment.
        inherit_env: Base the environment on this process's (secrets included!);
            by default it is only ``PATH``, ``HOME`` (the root) and ``LANG``.
        max_read_bytes: See :class:`FilesystemBackend`.
        max_write_bytes: See :class:`FilesystemBackend`.
        use_ripgrep: See :class:`FilesystemBackend`.
        root_dir: ``root``, by deepagents' name (give one of the two).
        virtual_mode: deepagents' option; only ``True`` (paths confined to the
            root), as for :class:`FilesystemBackend`.
    """

    can_execute = True

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 120,
        max_output_bytes: int = 100_000,
        output_grace: float = 0.5,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        max_read_bytes: int = 10 * MIB,
        max_write_bytes: int = 10 * MIB,
        use_ripgrep: bool | None = None,
        root_dir: str | os.PathLike[str] | None = None,
        virtual_mode: bool = True,
    ) -> None:
        super().__init__(
            root,
            max_read_bytes=max_read_bytes,
            max_write_bytes=max_write_bytes,
            use_ripgrep=use_ripgrep,
            root_dir=root_dir,
            virtual_mode=virtual_mode,
        )
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.output_grace = output_grace
        base = (
            dict(os.environ)
            if inherit_env
            else {
                "PATH": os.environ.get("PATH", _DEFAULT_PATH),
                "HOME": self.root,
                "LANG": "C.UTF-8",
            }
        )
        self._env = {**base, **(env or {})}

    async def execute(
        self,
        command: str,
        *,
        timeout: float | None = None,
    ) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in the root folder.

        Args:
            command: A shell command line.
            timeout: Seconds before the process group is killed; the backend's
                default when None.

        Returns:
            The merged stdout and stderr, the exit code, and whether the output was
            truncated or the command timed out.
        """
        limit = self.timeout if timeout is None else timeout
        await anyio.to_thread.run_sync(os.makedirs, self.root, 0o777, True)
        process = await anyio.open_process(
            ["sh", "-c", command],
            cwd=self.root,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        output = CappedOutput(self.max_output_bytes)
        timed_out = False
        lingering = False  # sh exited, but something it started still holds the output
        drained = anyio.Event()

        async def drain() -> None:
            assert process.stdout is not None
            async for chunk in process.stdout:
                output.add(chunk)
            drained.set()

        try:
            with anyio.move_on_after(limit) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(drain)
                    await process.wait()
                    # The output ends when every holder of the pipe is gone; a
                    # background child (``sleep 30 &``) may hold it long after sh
                    # exited. Read what is already there, then stop waiting.
                    with anyio.move_on_after(self.output_grace):
                        await drained.wait()
                    if not drained.is_set():
                        lingering = True
                        tg.cancel_scope.cancel()
            timed_out = scope.cancelled_caught
        finally:
            if timed_out or lingering or process.returncode is None:
                _kill_group(process.pid)
            # Reap the child even when our caller is being cancelled, briefly:
            # after SIGKILL, wait() returns at once.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await process.aclose()
        text = output.text()
        if output.truncated:
            text += output.truncation_note()
        if timed_out:
            text += f"\n[command timed out after {limit:g} seconds and was killed]"
        elif lingering:
            text += (
                "\n[the command exited, but background processes it started still held "
                "its output; they were stopped. Redirect a background process's output "
                "(cmd > log 2>&1 &) to keep it running]"
            )
        return ExecuteResult(
            output=text,
            exit_code=None if timed_out else process.returncode,
            truncated=output.truncated,
            timed_out=timed_out,
        )

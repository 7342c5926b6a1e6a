"""``BubblewrapWorkspace``: one thread's bubblewrap sandbox: its files, and its commands."""

from __future__ import annotations

import os
from typing import Protocol

from .._protocol import ExecuteResult
from ._bwrap_argv import limit_args
from ._run import run_contained
from ._sandbox import WORKSPACE
from ._workspace_fs import SandboxOwner, SandboxWorkspace

__all__ = ["BubblewrapWorkspace"]


class _Owner(SandboxOwner, Protocol):
    """What a workspace uses of its ``BubblewrapSandbox``."""

    prlimit: str

    def launcher(self) -> list[str]: ...

    def prefix_args(self) -> list[str]: ...


class BubblewrapWorkspace(SandboxWorkspace):
    """One workspace of a :class:`~deepactors.backends.BubblewrapSandbox`, and its commands.

    Obtained from the sandbox (one per thread, or the one shared workspace);
    not built directly. Its files are :class:`SandboxWorkspace`'s.
    """

    _sandbox: _Owner

    def __init__(self, sandbox: _Owner, root: str) -> None:
        super().__init__(sandbox, root)

    def _prepare(self) -> tuple[int, int]:
        """Create the workspace (worker thread) and the pipe bwrap reports its init's pid on."""
        self._prepare_root()
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_end, False)
        return read_end, write_end

    def _argv(self, command: str, write_end: int) -> list[str]:
        prefix = self._sandbox.prefix_args()
        return [
            *self._sandbox.launcher(),
            *prefix,
            "--bind",
            self.root,
            WORKSPACE,
            # Last, once every mount point exists: the sandbox's own root folder
            # (a tmpfs holding the mount points) is read-only too.
            "--remount-ro",
            "/",
            "--chdir",
            WORKSPACE,
            "--info-fd",
            str(write_end),
            "--",
            self._sandbox.prlimit,
            *limit_args(self.limits),
            "--",
            "/bin/sh",
            "-c",
            command,
        ]

    async def _run_command(self, command: str, timeout: float) -> ExecuteResult:
        """Run one command in fresh bubblewrap namespaces over this workspace.

        A command killed by a signal reports ``128 +`` the signal's number, as a
        shell does; see :meth:`SandboxWorkspace.execute`.
        """
        await self._sandbox.check()
        read_end, write_end = await self._run(self._prepare)
        try:
            argv = self._argv(command, write_end)
        except BaseException:
            os.close(read_end)
            os.close(write_end)
            raise
        return await run_contained(
            argv,
            timeout=timeout,
            output_bytes=self.limits.output_bytes,
            output_total_bytes=self.limits.output_total_bytes,
            watchdog=self.watchdog(),
            info_fd=(read_end, write_end),
        )

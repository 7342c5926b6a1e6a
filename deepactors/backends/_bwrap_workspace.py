"""``BubblewrapWorkspace``: one thread's sandbox, its files and its commands."""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
from typing import Protocol

from ._bwrap_argv import WORKSPACE, limit_args
from ._fdpath import Anchor
from ._filesystem import FilesystemBackend
from ._protocol import EditResult, ExecuteResult, WriteResult
from ._sandbox import SandboxLimits
from ._sandbox_run import run_contained


class _Owner(Protocol):
    """What a workspace uses of the sandbox that made it (a ``BubblewrapSandbox``)."""

    run_as: tuple[int, int] | None
    timeout: float
    limits: SandboxLimits
    max_read_bytes: int
    max_write_bytes: int
    prlimit: str

    def launcher(self) -> list[str]: ...

    def prefix_args(self) -> list[str]: ...

    async def check(self) -> None: ...


__all__ = ["BubblewrapWorkspace"]


class BubblewrapWorkspace(FilesystemBackend):
    """The workspace of one sandbox: a host folder, and commands run in bubblewrap over it.

    Obtained from :class:`~deepactors.backends.BubblewrapSandbox` (one per
    thread, or the one shared workspace); not built directly.

    The file operations are :class:`FilesystemBackend`'s, from the host side,
    over the workspace folder: a symlink a command planted (``ln -s /etc/passwd
    x``) is refused like any link leading out of the root, never followed; an
    absolute link written inside the sandbox (``/workspace/a``) is read as the
    sandbox means it. grep always searches in Python, walking from open
    descriptors (ripgrep walks by name, which a command running at the same
    time could redirect).
    """

    def __init__(self, sandbox: _Owner, root: str) -> None:
        super().__init__(
            root,
            max_read_bytes=sandbox.max_read_bytes,
            max_write_bytes=sandbox.max_write_bytes,
            use_ripgrep=False,
        )
        self._sandbox = sandbox
        self.timeout = sandbox.timeout
        self.limits: SandboxLimits = sandbox.limits
        self._ready = False

    def __repr__(self) -> str:
        return f"BubblewrapWorkspace({self.root!r})"

    can_execute = True

    @property
    def workspace(self) -> str:
        """The workspace as the commands see it."""
        return WORKSPACE

    def _anchor(self, *, create: bool = False) -> Anchor | None:
        anchor = super()._anchor(create=create)
        if anchor is not None:
            # An absolute link made inside the sandbox names /workspace/...: that
            # is this root. Any other absolute target is outside, and refused.
            anchor.prefixes = (*anchor.prefixes, WORKSPACE)
        if create and self._sandbox.run_as is not None:
            self._give_root()
        return anchor

    # -- ownership (when commands run as another host user than ours) --------

    def _give_root(self) -> None:
        uid, gid = self._sandbox.run_as or (-1, -1)
        st = os.lstat(self.root)
        if st.st_uid != uid:
            os.chown(self.root, uid, gid, follow_symlinks=False)

    def _give(self, path: str) -> None:
        """Hand ``path`` and the folders above it that we created to the commands' user."""
        run_as = self._sandbox.run_as
        if run_as is None:
            return
        anchor = self._anchor()
        if anchor is None:
            return
        parts = [p for p in path.split("/") if p]
        try:
            for depth in range(1, len(parts) + 1):
                sub = "/" + "/".join(parts[:depth])
                with (
                    contextlib.suppress(OSError),
                    anchor.target(sub, last="nofollow") as t,
                ):
                    st = t.stat
                    if st is None or stat_module.S_ISLNK(st.st_mode) or st.st_uid == run_as[0]:
                        continue
                    os.chown(t.name, *run_as, dir_fd=t.parent_fd, follow_symlinks=False)
        finally:
            anchor.close()

    def _write_sync(self, path: str, content: str, expected: str | None) -> WriteResult:
        result = super()._write_sync(path, content, expected)
        self._give(path)
        return result

    def _append_sync(self, path: str, content: str) -> WriteResult:
        result = super()._append_sync(path, content)
        self._give(path)
        return result

    def _edit_sync(
        self, path: str, old: str, new: str, replace_all: bool, expected: str | None
    ) -> EditResult:
        result = super()._edit_sync(path, old, new, replace_all, expected)
        self._give(path)
        return result

    # -- commands -------------------------------------------------------------

    def _prepare(self) -> tuple[int, int]:
        """Create the workspace (worker thread) and the pipe bwrap reports its init's pid on."""
        if not self._ready:
            os.makedirs(self.root, mode=0o755, exist_ok=True)
            if self._sandbox.run_as is not None:
                self._give_root()
            self._ready = True
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

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in the sandbox, in ``/workspace``.

        Args:
            command: A shell command line.
            timeout: Seconds before the sandbox (every process in it) is
                killed; the sandbox's default when None.

        Returns:
            The merged stdout and stderr (cut at the output cap), the exit code
            (128 + the signal's number for a command killed by a signal, as a
            shell reports it), and whether it was cut or timed out.

        Raises:
            SandboxUnavailable: bubblewrap cannot run here (checked once).
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
            timeout=self.timeout if timeout is None else timeout,
            output_bytes=self.limits.output_bytes,
            output_total_bytes=self.limits.output_total_bytes,
            info_fd=(read_end, write_end),
        )

    async def aclose(self) -> None:
        """Nothing to release: no command outlives its :meth:`execute` call."""

"""``SandboxWorkspace``: a sandbox's workspace from the host, safe against what commands leave."""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

from deepactors.errors import SandboxError

from .._fdpath import Anchor
from .._filesystem import FilesystemBackend
from .._protocol import EditResult, ExecuteResult, WriteResult
from ._sandbox import WORKSPACE, SandboxLimits

__all__ = ["SandboxOwner", "SandboxWorkspace"]

_QUOTA_PAUSE = 0.25


class SandboxOwner(Protocol):
    """What a workspace uses of the sandbox that made it."""

    run_as: tuple[int, int] | None
    timeout: float
    limits: SandboxLimits
    max_read_bytes: int
    max_write_bytes: int

    async def check(self) -> None: ...


class SandboxWorkspace(FilesystemBackend):
    """The host side of a sandbox's workspace: its files, for the agent's file tools.

    The file operations are :class:`FilesystemBackend`'s, from the host, over
    the workspace folder: a symlink a command planted (``ln -s /etc/passwd x``)
    is refused like any link leading out of the root, never followed; an
    absolute link written inside the sandbox (``/workspace/a``) is read as the
    sandbox means it. grep always searches in Python, walking from open
    descriptors (ripgrep walks by name, which a command running at the same
    time could redirect). When commands run as another host user
    (``run_as``), what the tools write is handed to that user.

    Subclasses run the commands (:meth:`execute`).
    """

    can_execute = True

    def __init__(self, sandbox: SandboxOwner, root: str) -> None:
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
        self._closed = False
        self._running: set[anyio.CancelScope] = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

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

    def _prepare_root(self) -> None:
        """Create the workspace folder, owned by the commands' user (worker thread)."""
        if not self._ready:
            os.makedirs(self.root, mode=0o755, exist_ok=True)
            if self._sandbox.run_as is not None:
                self._give_root()
            self._ready = True

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in the sandbox, in ``/workspace``.

        Args:
            command: A shell command line.
            timeout: Seconds before the sandbox (every process in it) is
                killed; the sandbox's default when None.

        Returns:
            The merged stdout and stderr (cut at the output cap), the exit code,
            and whether it was cut or timed out.

        Raises:
            SandboxUnavailable: The sandbox cannot run here (checked once).
            SandboxError: The workspace was closed (the command was killed).
        """
        if self._closed:
            raise SandboxError("this sandbox is closed")
        with anyio.CancelScope() as scope:
            self._running.add(scope)
            try:
                return await self._run_command(
                    command, self.timeout if timeout is None else timeout
                )
            finally:
                self._running.discard(scope)
        raise SandboxError("the sandbox was closed while the command ran; it was killed")

    async def _usage(self) -> int:
        """Bytes of disk the workspace uses (``du``: links never followed, one filesystem)."""
        result = await anyio.run_process(
            ["du", "-s", "-x", "-B1", self.root], check=False, stderr=subprocess.DEVNULL
        )
        try:
            return int(result.stdout.split()[0])
        except (IndexError, ValueError):
            return 0

    def watchdog(self) -> Callable[[], Awaitable[str]] | None:
        """What kills a command that grows the workspace past ``workspace_bytes`` (if set)."""
        limit = self.limits.workspace_bytes
        if limit is None:
            return None

        async def watch() -> str:
            start = await self._usage()
            pause = _QUOTA_PAUSE
            while True:
                await anyio.sleep(pause)
                began = time.monotonic()
                used = await self._usage()
                # A big workspace is walked less often, so checking never dominates.
                pause = max(_QUOTA_PAUSE, 10 * (time.monotonic() - began))
                if used > limit and used > start:
                    return (
                        f"the workspace grew to {used} bytes, past its limit of {limit}; "
                        "delete files to make room"
                    )

        return watch

    async def _run_command(self, command: str, timeout: float) -> ExecuteResult:
        """Run one command, isolated (each kind of sandbox its own way)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Kill the commands still running here, and refuse new ones."""
        self._closed = True
        for scope in list(self._running):
            scope.cancel()

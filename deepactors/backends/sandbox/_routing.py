"""``ThreadSandboxes``: one sandbox workspace per thread, chosen per call from the key in scope."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, NoReturn, Self, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import AsyncResource

from deepactors.errors import FileNotFound, SandboxError

from .._filesystem import MIB
from .._links import Resolved
from .._paths import normalize_path
from .._protocol import (
    DEFAULT_MAX_MATCHES,
    EditResult,
    ExecuteResult,
    FileInfo,
    GrepResult,
    ReadWindow,
    WriteResult,
)
from ._sandbox import WORKSPACE, SandboxKey, SandboxLimits, current_sandbox_key
from ._workspace_fs import SandboxWorkspace

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = ["NOBODY", "ThreadSandboxes"]

NOBODY = (65534, 65534)
W = TypeVar("W", bound=SandboxWorkspace)


class ThreadSandboxes(AsyncResource, Generic[W]):
    """What every local sandbox kind shares: workspaces per thread, the Backend protocol on them.

    A backend (``create_deep_agent(backend=...)``) and a
    :class:`~deepactors.backends.SandboxProvider`: each operation goes to the
    workspace of the :class:`SandboxKey` in scope (the file tools set it per
    call), ``root/<key's hash>``; or, with ``per_thread=False``, to ``root``
    shared by everyone. Subclasses say how commands run (:meth:`check`,
    :meth:`_new_workspace`).
    """

    can_execute = True

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        per_thread: bool,
        limits: SandboxLimits | None,
        timeout: float,
        run_as: tuple[int, int] | str | None,
        cleanup: bool,
        max_read_bytes: int = 10 * MIB,
        max_write_bytes: int = 10 * MIB,
    ) -> None:
        root = os.fspath(root)
        self.root = os.path.normpath(root) if os.path.isabs(root) else os.path.abspath(root)
        self.per_thread = per_thread
        self.limits = SandboxLimits() if limits is None else limits
        self.timeout = timeout
        if run_as == "auto":
            self.run_as: tuple[int, int] | None = NOBODY if os.geteuid() == 0 else None
        elif isinstance(run_as, str):
            raise ValueError(f"run_as: (uid, gid), 'auto' or None, not {run_as!r}")
        else:
            self.run_as = run_as
        self.cleanup = cleanup
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self._workspaces: dict[SandboxKey | None, W] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r}, per_thread={self.per_thread})"

    @property
    def workspace(self) -> str:
        """The workspace as the commands see it."""
        return WORKSPACE

    async def __aenter__(self) -> Self:
        await self.check()
        return self

    async def check(self) -> None:
        """Make sure commands can run here (once), or raise ``SandboxUnavailable`` saying why."""
        raise NotImplementedError

    def _new_workspace(self, root: str) -> W:
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")

    async def aclose(self) -> None:
        """Kill the commands still running, and delete the workspaces when ``cleanup`` says so."""
        self._closed = True
        workspaces = list(self._workspaces.values())
        self._workspaces.clear()
        for ws in workspaces:
            await ws.aclose()
        if self.cleanup:
            with anyio.CancelScope(shield=True):
                for ws in workspaces:
                    if ws.root != self.root:
                        await anyio.to_thread.run_sync(_remove, ws.root)

    # -- per thread -----------------------------------------------------------

    def for_key(self, key: SandboxKey | None) -> W:
        """The workspace of ``key`` (``root`` itself when shared)."""
        if not self.per_thread:
            key = None
        elif key is None:
            raise SandboxError(
                "this per-thread sandbox is used outside a tool call of a run, so it "
                "cannot tell whose workspace to use (per_thread=False shares one)"
            )
        ws = self._workspaces.get(key)
        if ws is None:
            root = self.root if key is None else os.path.join(self.root, key.slug)
            ws = self._workspaces[key] = self._new_workspace(root)
        return ws

    async def open_sandbox(self, key: SandboxKey) -> W:
        """The sandbox of ``key``, checked (see :class:`SandboxProvider`)."""
        await self.check()
        return self.for_key(key)

    def _current(self) -> W:
        self._check_open()
        return self.for_key(current_sandbox_key())

    def _reading(self) -> W | None:
        """The workspace to read, None outside any thread (per thread only).

        Middleware that reads files before any tool call (memory, skills) finds
        nothing there instead of failing the run: no workspace is guessed, and
        none is shared between threads by accident.
        """
        self._check_open()
        key = current_sandbox_key()
        if self.per_thread and key is None:
            return None
        return self.for_key(key)

    def bind(self, state: State, *, name: str = "main") -> Self:
        """This sandbox: the workspace is chosen per call, from the thread in scope."""
        return self

    # -- the Backend protocol, on the current key's workspace -----------------

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """Run ``command`` in the sandbox of the key in scope (see :class:`SandboxBackend`).

        Raises:
            SandboxError: The sandbox was closed (the command was killed).
        """
        return await self._current().execute(command, timeout=timeout)

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`."""
        ws = self._reading()
        if ws is None:
            return [] if normalize_path(path) == "/" else _absent(path)
        return await ws.ls(path)

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        ws = self._reading()
        return _absent(path) if ws is None else await ws.read(path, offset=offset, limit=limit)

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        return await self._current().write(path, content, expected_version=expected_version)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`."""
        return await self._current().append(path, content)

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        expected_version: str | None = None,
    ) -> EditResult:
        """See :meth:`Backend.edit`."""
        return await self._current().edit(
            path, old, new, replace_all=replace_all, expected_version=expected_version
        )

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`."""
        await self._current().delete(path)

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`."""
        ws = self._reading()
        return [] if ws is None else await ws.glob(pattern, path)

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """See :meth:`Backend.grep`."""
        ws = self._reading()
        if ws is None:
            return GrepResult(matches=(), truncated=False)
        return await ws.grep(pattern, path=path, glob=glob, max_matches=max_matches)

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`."""
        ws = self._reading()
        return _absent(path) if ws is None else await ws.stat(path)

    async def resolve_links(self, paths: Sequence[str]) -> list[Resolved]:
        """See :meth:`FilesystemBackend.resolve_links`."""
        ws = self._reading()
        return [Resolved(p) for p in paths] if ws is None else await ws.resolve_links(paths)


def _absent(path: str) -> NoReturn:
    raise FileNotFound(
        f"nothing at {path}: this per-thread sandbox is read outside a tool call, with "
        "no thread's workspace in scope",
        path=path,
    )


def _remove(root: str) -> None:
    # rmtree never follows a symlink a command left: it removes the link itself.
    shutil.rmtree(root, ignore_errors=True)

"""``ContainerSandbox``: commands isolated in Docker or Podman containers, one per command."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping
from typing import Literal, Protocol

import anyio
import anyio.to_thread

from deepactors.errors import SandboxUnavailable

from .._filesystem import MIB
from .._protocol import ExecuteResult
from ._routing import ThreadSandboxes
from ._run import run_contained
from ._sandbox import WORKSPACE, SandboxLimits
from ._workspace_fs import SandboxOwner, SandboxWorkspace

__all__ = ["ContainerSandbox", "ContainerWorkspace"]

_PROBE_TIMEOUT = 60.0


class _Owner(SandboxOwner, Protocol):
    """What a workspace uses of its ``ContainerSandbox``."""

    engine: str

    def run_args(self, root: str, name: str) -> list[str]: ...


class ContainerWorkspace(SandboxWorkspace):
    """One workspace of a :class:`~deepactors.backends.ContainerSandbox`, and its commands.

    Obtained from the sandbox; not built directly. Its files are
    :class:`SandboxWorkspace`'s.
    """

    _sandbox: _Owner

    def __init__(self, sandbox: _Owner, root: str) -> None:
        super().__init__(sandbox, root)

    async def _run_command(self, command: str, timeout: float) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in a new container over the workspace.

        Each command gets a container of its own (``run --rm``), removed when
        it ends; on a timeout, a flood of output or cancellation the client is
        killed and the container removed (``rm -f``), which kills everything in it.
        """
        await self._sandbox.check()
        await self._run(self._prepare_root)
        name = f"deepactors-{secrets.token_hex(8)}"
        engine = self._sandbox.engine

        async def remove() -> None:
            await anyio.run_process([engine, "rm", "-f", name], check=False)

        return await run_contained(
            [*self._sandbox.run_args(self.root, name), "sh", "-c", command],
            timeout=timeout,
            output_bytes=self.limits.output_bytes,
            output_total_bytes=self.limits.output_total_bytes,
            watchdog=self.watchdog(),
            on_kill=remove,
        )


class ContainerSandbox(ThreadSandboxes[ContainerWorkspace]):
    """Shell commands isolated in Docker or Podman containers, one workspace per thread.

    For machines where a container engine runs: each :meth:`execute` starts a
    container of ``image`` (never pulled: it must be there) with the thread's
    workspace mounted at ``/workspace`` (the only writable place beside a
    size-limited ``/tmp``), a read-only root, no network unless asked, no
    capabilities, ``no-new-privileges``, the commands' user, and the same
    limits as :class:`BubblewrapSandbox` (processes and memory through the
    container's cgroup, which bounds resident memory, not just address space).
    Nothing of the server's environment is passed. The container is removed
    when the command ends, times out or is cancelled, with everything it started.

    The file side, the per-thread workspaces and the options shared with
    :class:`BubblewrapSandbox` (``per_thread``, ``limits``, ``timeout``,
    ``run_as``, ``cleanup``) are the same.

    Args:
        root: Host folder holding the workspaces.
        image: The image commands run in (for example ``python:3.12-slim``).
        engine: ``docker`` or ``podman`` (a name or path); None: podman when
            installed, else docker.
        per_thread: One workspace per thread (True) or ``root`` shared (False).
        network: Give the containers the engine's default network.
        env: Variables for the commands.
        limits: Resource limits of each command.
        timeout: Default seconds a command may run.
        run_as: ``(uid, gid)`` the commands run as; ``"auto"``: nobody when this
            process is root, else this process's user; None: this process's user.
        cleanup: Delete the workspaces created under ``root`` when closed.
        max_read_bytes: See :class:`FilesystemBackend`.
        max_write_bytes: See :class:`FilesystemBackend`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        image: str,
        engine: str | None = None,
        per_thread: bool = True,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        timeout: float = 120,
        run_as: tuple[int, int] | Literal["auto"] | None = "auto",
        cleanup: bool = False,
        max_read_bytes: int = 10 * MIB,
        max_write_bytes: int = 10 * MIB,
    ) -> None:
        super().__init__(
            root,
            per_thread=per_thread,
            limits=limits,
            timeout=timeout,
            run_as=run_as,
            cleanup=cleanup,
            max_read_bytes=max_read_bytes,
            max_write_bytes=max_write_bytes,
        )
        self.image = image
        self.engine = engine or ""
        self.network = network
        self.env = dict(env or {})
        self._ready = False
        self._failure: SandboxUnavailable | None = None
        self._lock = anyio.Lock()

    def run_args(self, root: str, name: str) -> list[str]:
        """The engine's ``run`` command line up to the command, for workspace ``root``."""
        uid, gid = self.run_as if self.run_as is not None else (os.getuid(), os.getgid())
        limits = self.limits
        args = [
            self.engine, "run", "--rm", "--name", name, "--pull", "never",
            "--network", "bridge" if self.network else "none",
            "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--user", f"{uid}:{gid}", "--init",
            "--mount", f"type=bind,source={root},target={WORKSPACE}",
            "--workdir", WORKSPACE, "--ulimit", "core=0:0",
        ]  # fmt: skip
        tmp = "/tmp:rw,mode=1777" + (f",size={limits.tmp_bytes}" if limits.tmp_bytes else "")
        args += ["--tmpfs", tmp]
        if limits.processes is not None:
            args += ["--pids-limit", str(limits.processes)]
        if limits.memory_bytes is not None:
            args += ["--memory", str(limits.memory_bytes)]
            args += ["--memory-swap", str(limits.memory_bytes)]
        for name_, value in (
            ("cpu", limits.cpu_seconds),
            ("fsize", limits.file_bytes),
            ("nofile", limits.open_files),
        ):
            if value is not None:
                args += ["--ulimit", f"{name_}={value}:{value}"]
        env = {"HOME": WORKSPACE, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **self.env}
        for key, text in env.items():
            args += ["--env", f"{key}={text}"]
        return [*args, self.image]

    def _setup(self) -> None:
        engine = self.engine or ("podman" if shutil.which("podman") else "docker")
        found = shutil.which(engine)
        if found is None:
            raise SandboxUnavailable(
                f"no container engine: {engine!r} is not installed; commands are not "
                "run on the host instead"
            )
        self.engine = found
        os.makedirs(self.root, mode=0o755, exist_ok=True)
        # Shared, root is the workspace: the commands' user owns it. Per thread,
        # root stays ours: only its workspaces are theirs, none can rename another.
        if (
            not self.per_thread
            and self.run_as is not None
            and os.lstat(self.root).st_uid != self.run_as[0]
        ):
            os.chown(self.root, *self.run_as, follow_symlinks=False)

    async def _probe(self, argv: list[str], what: str) -> None:
        result = await run_contained(
            argv, timeout=_PROBE_TIMEOUT, output_bytes=4000, output_total_bytes=65536
        )
        if result.exit_code != 0:
            self._failure = SandboxUnavailable(
                f"{what}: {result.output.strip() or result.exit_code}; commands are not "
                "run on the host instead"
            )
            raise self._failure

    async def check(self) -> None:
        """Make sure the engine runs the image here (once; then cached).

        Raises:
            SandboxUnavailable: It cannot (no engine, no daemon, no image), and why.
            SandboxError: The sandbox is closed.
        """
        self._check_open()
        if self._ready:
            return
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._ready:
                return
            try:
                await anyio.to_thread.run_sync(self._setup)
            except OSError as exc:
                raise SandboxUnavailable(f"cannot prepare the sandbox's folder: {exc}") from exc
            await self._probe(
                [self.engine, "version"], f"{self.engine} cannot reach its daemon or service"
            )
            await self._probe(
                [self.engine, "image", "inspect", self.image],
                f"the image {self.image!r} is not on this machine (pull it first)",
            )
            name = f"deepactors-probe-{secrets.token_hex(6)}"
            await self._probe(
                [*self.run_args(self.root, name), "true"],
                f"{self.engine} cannot run a container of {self.image!r}",
            )
            self._ready = True

    def _new_workspace(self, root: str) -> ContainerWorkspace:
        return ContainerWorkspace(self, root)

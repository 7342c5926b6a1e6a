"""``BubblewrapSandbox``: commands isolated by bubblewrap, one workspace per thread."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Literal

import anyio
import anyio.to_thread

from deepactors.errors import SandboxUnavailable

from .._filesystem import MIB
from ._bwrap_argv import BwrapConfig, bwrap_prefix
from ._bwrap_workspace import BubblewrapWorkspace
from ._routing import ThreadSandboxes
from ._run import run_contained
from ._sandbox import WORKSPACE, SandboxLimits

__all__ = ["BubblewrapSandbox"]

_PROBE_TIMEOUT = 30.0


class BubblewrapSandbox(ThreadSandboxes[BubblewrapWorkspace]):
    """Shell commands isolated from the host by bubblewrap (``bwrap``), one workspace per thread.

    Each :meth:`execute` starts a fresh sandbox (no daemon) in which:

    * the thread's workspace (a folder under ``root``) is mounted at
      ``/workspace`` and is the only place a command can write, besides a
      private, size-limited ``/tmp``;
    * the host is not visible beyond ``/usr`` (and the ``/bin``, ``/lib``
      links into it), a few files of ``/etc`` that programs need to start
      (never ``passwd`` or ``shadow``), and what ``python``, ``tools`` and
      ``paths`` add, all read-only;
    * there is no network unless ``network=True`` (its own empty network
      namespace: not even the host's ``127.0.0.1``);
    * there is a PID namespace of its own: the server's processes are not
      visible, and when the command exits, times out or is cancelled every
      process it started is killed (nothing outlives the call);
    * the environment holds only ``PATH``, ``HOME``, ``LANG``, ``TMPDIR`` and
      ``env``: none of the server's variables (API keys) are passed;
    * CPU time, memory, processes, file size, open files and output are
      limited (:class:`SandboxLimits`);
    * when the server runs as root, commands run as an unprivileged host user
      (``run_as``), so the kernel enforces the process limit and no root-owned
      file is readable through the owner's rights.

    The file operations (the agent's file tools) work on the same workspace
    from the host, refusing any symlink a command planted that leads out of it.

    Per thread (the default): the agent's file tools and ``execute`` reach the
    workspace of the calling run's thread and owner (:class:`SandboxKey`), in
    ``root/<hash of owner and thread>``; two threads never see each other's
    files. Used outside a tool call (with no key in scope) it refuses,
    rather than guess a workspace. ``per_thread=False`` shares ``root`` as one
    workspace between every caller.

    Whether bubblewrap can run here is checked once, when the sandbox is
    opened (``async with``) or first used: if it cannot (not installed, no user
    namespaces), :class:`~deepactors.errors.SandboxUnavailable` says why.
    Nothing ever falls back to running on the host.

    Args:
        root: Host folder holding the workspaces (created when missing). When
            commands run as another user (``run_as``), that user must be able
            to reach it: every folder above it searchable by others.
        per_thread: One workspace per thread (True) or ``root`` shared (False).
        python: An interpreter (path, or name on ``PATH``) whose installation
            becomes visible read-only and leads ``PATH``. Debian's
            ``/usr/bin/python3`` is visible anyway.
        tools: Programs outside ``/usr`` to make visible (names or paths).
        paths: Further host paths to make visible read-only.
        network: Let commands use the host's network.
        env: Variables for the commands (the server's own are never passed).
        limits: Resource limits of each command (default: :class:`SandboxLimits`'s).
        timeout: Default seconds a command may run before it is killed.
        run_as: ``(uid, gid)`` to run commands as on the host; ``"auto"``:
            nobody (65534) when this process is root, else this process's own
            user; None: always this process's user.
        cleanup: Delete the workspaces created under ``root`` when closed.
        max_read_bytes: See :class:`FilesystemBackend`.
        max_write_bytes: See :class:`FilesystemBackend`.
    """

    can_execute = True

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        per_thread: bool = True,
        python: str | None = None,
        tools: Sequence[str] = (),
        paths: Sequence[str] = (),
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
        self.config = BwrapConfig(
            python=python, tools=tuple(tools), paths=tuple(paths), network=network, env=env,
            limits=self.limits,
        )  # fmt: skip
        self.bwrap = "bwrap"
        self.prlimit = "/usr/bin/prlimit"
        self._prefix: list[str] | None = None
        self._launcher: list[str] = []
        self._failure: SandboxUnavailable | None = None
        self._lock = anyio.Lock()

    def launcher(self) -> list[str]:
        """How bwrap starts: itself, or by ``setpriv`` as ``run_as`` (after :meth:`check`)."""
        return self._launcher

    def prefix_args(self) -> list[str]:
        """bwrap's options before the workspace (after :meth:`check`)."""
        assert self._prefix is not None, "check() first"
        return self._prefix

    def _setup(self) -> list[str]:
        found = shutil.which("bwrap")
        if found is None:
            raise SandboxUnavailable(
                "bubblewrap is not installed (apt-get install bubblewrap); commands are "
                "not run on the host instead"
            )
        self.bwrap = found
        prlimit = shutil.which("prlimit")
        if prlimit is None or not prlimit.startswith("/usr/"):
            raise SandboxUnavailable("prlimit (util-linux) is not installed under /usr")
        self.prlimit = prlimit
        if self.run_as is not None:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                raise SandboxUnavailable("setpriv (util-linux) is not installed")
            uid, gid = self.run_as
            self._launcher = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        self._launcher = [*self._launcher, found]
        os.makedirs(self.root, mode=0o755, exist_ok=True)
        # Shared, root is the workspace: the commands' user owns it. Per thread,
        # root stays ours: only its workspaces are theirs, none can rename another.
        if (
            not self.per_thread
            and self.run_as is not None
            and os.lstat(self.root).st_uid != self.run_as[0]
        ):
            os.chown(self.root, *self.run_as, follow_symlinks=False)
        prefix, _ = bwrap_prefix(self.config)
        return prefix

    async def check(self) -> None:
        """Make sure bubblewrap runs here with this sandbox's options (once; then cached).

        Raises:
            SandboxUnavailable: It cannot, and the message says why (bubblewrap's own words).
            SandboxError: The sandbox is closed.
        """
        self._check_open()
        if self._prefix is not None:
            return
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._prefix is not None:
                return
            try:
                prefix = await anyio.to_thread.run_sync(self._setup)
            except OSError as exc:
                raise SandboxUnavailable(f"cannot prepare the sandbox's folder: {exc}") from exc
            argv = [self.bwrap, *prefix, "--bind", self.root, WORKSPACE]
            argv += ["--remount-ro", "/", "--", "/bin/true"]
            result = await run_contained(
                [*self.launcher(), *argv[1:]],
                timeout=_PROBE_TIMEOUT,
                output_bytes=4000,
                output_total_bytes=65536,
            )
            if result.exit_code != 0:
                said = result.output.strip() or f"exit status {result.exit_code}"
                hint = "are user namespaces enabled for this user?"
                if self.run_as is not None and "Permission denied" in said:
                    hint = (
                        f"commands run as uid {self.run_as[0]}, which must be able to reach "
                        f"{self.root} and the paths made visible (every folder above them "
                        "searchable by others)"
                    )
                self._failure = SandboxUnavailable(
                    f"bubblewrap cannot create the sandbox here ({hint}): {said}; "
                    "commands are not run on the host instead"
                )
                raise self._failure
            self._prefix = prefix

    def _new_workspace(self, root: str) -> BubblewrapWorkspace:
        return BubblewrapWorkspace(self, root)

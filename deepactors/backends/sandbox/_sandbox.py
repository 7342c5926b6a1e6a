"""Sandboxes: backends whose commands run isolated from the host, one workspace per thread.

A :class:`SandboxBackend` is a file backend (the :class:`~deepactors.backends.Backend`
protocol) whose files are a *workspace* and whose :meth:`~SandboxBackend.execute`
runs commands somewhere they cannot reach the host: bubblewrap namespaces here
(:class:`~deepactors.backends.BubblewrapSandbox`), a container, or a remote
machine. The file tools and the ``execute`` tool see the same workspace.

Per thread: a :class:`SandboxProvider` opens one sandbox per :class:`SandboxKey`
(the conversation thread and who it belongs to). The file tools say which key
a call is for with :func:`sandbox_scope`; a per-thread sandbox used as an
agent's backend routes each operation to the sandbox of the key in scope, and
refuses to work without one (it never picks a shared workspace by accident).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._protocol import Backend, ExecuteResult

__all__ = [
    "WORKSPACE",
    "SandboxBackend",
    "SandboxKey",
    "SandboxLimits",
    "SandboxProvider",
    "current_sandbox_key",
    "sandbox_scope",
]

WORKSPACE = "/workspace"
"""Where the workspace is mounted inside a local sandbox (the commands' working folder)."""

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """What one command in a sandbox may use; None leaves that resource unlimited.

    Attributes:
        cpu_seconds: CPU time of each process (``RLIMIT_CPU``): past it the
            process is killed (``SIGXCPU``, then ``SIGKILL``).
        memory_bytes: Address space of each process (``RLIMIT_AS``): allocations
            past it fail. Virtual, not resident: runtimes that reserve large
            address ranges up front (the JVM, Go) need more than they use.
        processes: Processes and threads the sandbox may have at once
            (``RLIMIT_NPROC``, counted in the sandbox's own user namespace on
            Linux 5.14+): a fork bomb stops there.
        file_bytes: Largest file a command may write (``RLIMIT_FSIZE``): a
            write past it fails (``SIGXFSZ``).
        open_files: Descriptors each process may hold (``RLIMIT_NOFILE``).
        tmp_bytes: Size of the sandbox's private ``/tmp`` (memory-backed).
        output_bytes: Output kept and shown to the model; the rest is drained
            and dropped, with a note. Below the file tools' eviction size
            (80,000 characters), so an output is never moved to a file: a
            per-thread sandbox is reached only inside a tool call.
        output_total_bytes: Output read in all before the command is killed
            (``yes`` forever cannot keep the host reading).
        workspace_bytes: Disk the workspace may use (``du``), checked while a
            command runs (every 0.25 s, or ten times as long as a check takes):
            a command that grows it past this is killed. Off by default: each
            check walks the workspace. The disk it is on stays the hard floor.
    """

    cpu_seconds: int | None = 60
    memory_bytes: int | None = 4 * GIB
    processes: int | None = 256
    file_bytes: int | None = 256 * MIB
    open_files: int | None = 1024
    tmp_bytes: int | None = 256 * MIB
    output_bytes: int = 50_000
    output_total_bytes: int = 64 * MIB
    workspace_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class SandboxKey:
    """Whose sandbox: a conversation thread, and the caller it belongs to.

    Attributes:
        thread: The thread id (for a run without a thread, its run id).
        owner: Who the thread belongs to (the server's authenticated caller's
            id), None when no one authenticated. Two owners' threads of the
            same id get different sandboxes.
    """

    thread: str
    owner: str | None = None

    @classmethod
    def for_run(cls, thread_id: str | None, root_run_id: str, identity: object) -> SandboxKey:
        """The key of a run: its thread (or its tree's root run) and its caller's id."""
        owner = getattr(identity, "id", None)
        return cls(thread_id or f"run:{root_run_id}", owner if isinstance(owner, str) else None)

    @property
    def slug(self) -> str:
        """A folder name for this key: a hash, so any id is safe on disk."""
        raw = f"{self.owner or ''}\0{self.thread}".encode()
        return hashlib.sha256(raw).hexdigest()[:32]


_KEY: ContextVar[SandboxKey | None] = ContextVar("deepactors_sandbox_key", default=None)


@contextlib.contextmanager
def sandbox_scope(key: SandboxKey | None) -> Iterator[None]:
    """Run the enclosed backend calls for ``key``'s sandbox (the file tools do this)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


def current_sandbox_key() -> SandboxKey | None:
    """The key set by the innermost :func:`sandbox_scope`, None outside any."""
    return _KEY.get()


@runtime_checkable
class SandboxBackend(Backend, Protocol):
    """A file backend over a workspace whose commands run isolated from the host.

    The seam every sandbox implements, local or remote: the file operations of
    :class:`~deepactors.backends.Backend` act on the workspace, and
    :meth:`execute` runs a shell command with the workspace as its working
    folder. Whatever the isolation, a sandbox guarantees:

    * the exit code (None when the command was killed for its timeout);
    * output cut at a cap, with ``truncated`` set and a note in the text;
    * nothing the command started is still running when :meth:`execute`
      returns or is cancelled;
    * it never runs a command on the host instead when it cannot isolate it
      (:class:`~deepactors.errors.SandboxUnavailable`).

    Close it with :meth:`aclose` (``async with``) when it is done.
    """

    @property
    def workspace(self) -> str:
        """The workspace folder as the commands see it (their working folder)."""
        ...

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in the workspace, isolated.

        Args:
            command: A shell command line.
            timeout: Seconds before everything it started is killed; the
                sandbox's default when None.

        Raises:
            SandboxUnavailable: The sandbox cannot run here.
        """
        ...

    async def aclose(self) -> None:
        """Stop anything still running and release the sandbox."""
        ...


@runtime_checkable
class SandboxProvider(Protocol):
    """Opens one sandbox per thread (the seam a remote sandbox service implements).

    A Modal, Daytona or E2B integration is a provider whose
    :meth:`open_sandbox` creates (or reconnects to) the remote machine for a
    key and returns a :class:`SandboxBackend` over it; see ``docs/sandbox.md``.
    """

    async def open_sandbox(self, key: SandboxKey) -> SandboxBackend:
        """The sandbox for ``key``, opened (the same one for the same key while open).

        Raises:
            SandboxUnavailable: It cannot be opened here, and why.
        """
        ...

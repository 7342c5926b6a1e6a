"""Sandboxes: backends whose commands run isolated from the host, one workspace per thread.

bubblewrap (:class:`BubblewrapSandbox`, one workspace per thread, no network,
limits on processes, memory and time) and containers (:class:`ContainerSandbox`,
Docker or Podman), both behind :class:`SandboxBackend`; the sandbox key in scope
picks a thread's workspace per call.
"""

from __future__ import annotations

from ._bwrap import BubblewrapSandbox as BubblewrapSandbox
from ._bwrap_workspace import BubblewrapWorkspace as BubblewrapWorkspace
from ._container import ContainerSandbox as ContainerSandbox
from ._sandbox import SandboxBackend as SandboxBackend
from ._sandbox import SandboxKey as SandboxKey
from ._sandbox import SandboxLimits as SandboxLimits
from ._sandbox import SandboxProvider as SandboxProvider
from ._sandbox import current_sandbox_key as current_sandbox_key
from ._sandbox import sandbox_scope as sandbox_scope

__all__ = [
    "BubblewrapSandbox",
    "BubblewrapWorkspace",
    "ContainerSandbox",
    "SandboxBackend",
    "SandboxKey",
    "SandboxLimits",
    "SandboxProvider",
    "current_sandbox_key",
    "sandbox_scope",
]

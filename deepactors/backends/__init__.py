"""File backends: where an agent's files live.

* :class:`StateBackend` (the default): in the agent's ``files`` state channel.
* :class:`FilesystemBackend`: real files under a root folder.
* :class:`StoreBackend`: values in a long-term :class:`~deepactors.persistence.Store`.
* :class:`CompositeBackend`: several of these mounted at path prefixes.
* :class:`LocalShellBackend`: a disk folder that can also run shell commands
  (not a sandbox).
* :class:`BubblewrapSandbox`: commands isolated from the host (Linux
  namespaces through bubblewrap), one workspace per thread; the
  :class:`SandboxBackend` and :class:`SandboxProvider` protocols are the seam
  for other sandboxes (remote machines). :class:`ContainerSandbox` does the
  same in Docker or Podman containers.

All of them follow the :class:`Backend` protocol and accept the same virtual
paths (:func:`normalize_path`).
"""

from .._core.public import publish as _publish
from ._composite import CompositeBackend as CompositeBackend
from ._filesystem import FilesystemBackend as FilesystemBackend
from ._links import APPROVED as APPROVED
from ._links import resolve_links as resolve_links
from ._paths import normalize_path as normalize_path
from ._permissions import FilesystemPermission as FilesystemPermission
from ._permissions import PermissionedBackend as PermissionedBackend
from ._permissions import PermissionRules as PermissionRules
from ._permissions import check_execute as check_execute
from ._protocol import ABSENT as ABSENT
from ._protocol import DEFAULT_MAX_MATCHES as DEFAULT_MAX_MATCHES
from ._protocol import Backend as Backend
from ._protocol import EditResult as EditResult
from ._protocol import ExecuteResult as ExecuteResult
from ._protocol import FileInfo as FileInfo
from ._protocol import FilesOnly as FilesOnly
from ._protocol import GrepMatch as GrepMatch
from ._protocol import GrepResult as GrepResult
from ._protocol import ReadWindow as ReadWindow
from ._protocol import WriteResult as WriteResult
from ._protocol import check_version as check_version
from ._shell import LocalShellBackend as LocalShellBackend
from ._state import StateBackend as StateBackend
from ._store import StoreBackend as StoreBackend
from ._text import apply_edit as apply_edit
from ._text import split_lines as split_lines
from .sandbox import BubblewrapSandbox as BubblewrapSandbox
from .sandbox import BubblewrapWorkspace as BubblewrapWorkspace
from .sandbox import ContainerSandbox as ContainerSandbox
from .sandbox import SandboxBackend as SandboxBackend
from .sandbox import SandboxKey as SandboxKey
from .sandbox import SandboxLimits as SandboxLimits
from .sandbox import SandboxProvider as SandboxProvider
from .sandbox import current_sandbox_key as current_sandbox_key
from .sandbox import sandbox_scope as sandbox_scope

__all__ = [
    "ABSENT",
    "APPROVED",
    "DEFAULT_MAX_MATCHES",
    "Backend",
    "BubblewrapSandbox",
    "BubblewrapWorkspace",
    "CompositeBackend",
    "ContainerSandbox",
    "EditResult",
    "ExecuteResult",
    "FileInfo",
    "FilesOnly",
    "FilesystemBackend",
    "FilesystemPermission",
    "GrepMatch",
    "GrepResult",
    "LocalShellBackend",
    "PermissionRules",
    "PermissionedBackend",
    "ReadWindow",
    "SandboxBackend",
    "SandboxKey",
    "SandboxLimits",
    "SandboxProvider",
    "StateBackend",
    "StoreBackend",
    "WriteResult",
    "apply_edit",
    "check_execute",
    "check_version",
    "current_sandbox_key",
    "normalize_path",
    "resolve_links",
    "sandbox_scope",
    "split_lines",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())

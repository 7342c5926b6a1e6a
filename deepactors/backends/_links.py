"""Where a path really leads: symlinks inside a root followed, hard links flagged.

Permission rules are about virtual paths, but on disk ``/public/link`` may be a
symlink to ``../secrets``. :func:`resolve_links` asks a backend where each path
leads (its *real* path: symlinks inside the root expanded, ``..`` in their
text applied), so :class:`~deepactors.backends.PermissionedBackend` can judge
the rules on both. Backends without links (state, store) answer the path as
given.

Two context variables carry the permission layer's decisions into the worker
threads that touch the disk (``anyio`` and ``trio`` copy the context there):

* :data:`LINK_POLICY`: while set, a walk that meets a symlink refuses it
  (the path was checked on its real form, so a link swapped in since the check
  is refused rather than followed), and opening a regular file with more than
  one hard link is refused when the rules deny something (see
  :class:`LinkPolicy`).
* :data:`APPROVED`: the real paths a human approved in this tool call, so a
  write that a link sends into an ``interrupt`` area without approval is
  refused by the backend even if the link appeared after the question.
"""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from deepactors.errors import PermissionDenied

__all__ = [
    "APPROVED",
    "LINK_POLICY",
    "LinkPolicy",
    "Resolved",
    "check_shared",
    "resolve_links",
]


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where a path leads.

    Attributes:
        real: The virtual path with every symlink (inside the root) expanded;
            missing components are kept as written.
        shared: It is a regular file with more than one hard link, so another
            name (which cannot be found cheaply) reaches the same content.
    """

    real: str
    shared: bool = False


@dataclass(frozen=True, slots=True)
class LinkPolicy:
    """What the disk walk refuses while the permission layer runs an operation.

    Attributes:
        no_symlinks: Refuse any symlink met on the path (it was checked on its
            real form, with no symlink in it).
        no_hardlinks: Refuse opening a regular file that has other hard links.
    """

    no_symlinks: bool = True
    no_hardlinks: bool = False


LINK_POLICY: ContextVar[LinkPolicy | None] = ContextVar("deepactors_link_policy", default=None)
APPROVED: ContextVar[frozenset[str]] = ContextVar("deepactors_approved", default=frozenset())


def check_shared(st: os.stat_result, path: str) -> None:
    """Refuse a regular file with other hard links when the policy says so.

    A hard link is the same file under another name; that name may be denied
    and cannot be found without searching the whole disk. So, while any rule
    denies the operation, such files are refused wherever they are reached.
    """
    policy = LINK_POLICY.get()
    if policy and policy.no_hardlinks and stat_module.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise PermissionDenied(
            f"permission denied: {path} has other hard links, which this agent's file "
            "permissions cannot check",
            path=path,
        )


def symlink_refused(path: str) -> PermissionDenied | None:
    """The error for a symlink met under the policy, or None when links are followed."""
    policy = LINK_POLICY.get()
    if policy is None or not policy.no_symlinks:
        return None
    return PermissionDenied(
        f"permission denied: {path} changed into a symlink after its permission check",
        path=path,
    )


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s]


async def resolve_links(backend: object, paths: Sequence[str]) -> list[Resolved]:
    """Where each normalised path leads in ``backend`` (one worker-thread call per disk).

    Raises:
        PathOutsideRoot: A path leads outside its backend's root.
    """
    method = getattr(backend, "resolve_links", None)
    if method is None or not paths:
        return [Resolved(p) for p in paths]
    result: list[Resolved] = await method(paths)
    return result

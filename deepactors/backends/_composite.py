"""``CompositeBackend``: several backends mounted at path prefixes."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, final

import anyio.to_thread

from deepactors.backends._glob import strip_mount
from deepactors.backends._links import Resolved, resolve_links
from deepactors.backends._paths import is_under, join, normalize_path, path_key, relative_to
from deepactors.backends._protocol import (
    DEFAULT_MAX_MATCHES,
    Backend,
    EditResult,
    ExecuteResult,
    FileInfo,
    GrepMatch,
    GrepResult,
    ReadWindow,
    WriteResult,
)
from deepactors.errors import ConfigurationError, FileNotFound, InvalidPath

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = ["CompositeBackend"]


async def _strip_mount(pattern: str, mount: str) -> list[str]:
    # A model's pattern is matched in a worker thread, never on the loop.
    return await anyio.to_thread.run_sync(strip_mount, pattern, tuple(mount.split("/")))


def _refuse_shell_overlap(default: Backend, mounts: Mapping[str, Backend]) -> None:
    """Refuse a route whose folder a command-running backend of the composite can reach."""
    shells = [b for b in (default, *mounts.values()) if b.can_execute and _root(b)]
    for mount, backend in mounts.items():
        root = _root(backend)
        for shell in shells:
            top = _root(shell)
            if shell is backend or not root or not top:
                continue
            if root == top or root.startswith(top.rstrip(os.sep) + os.sep):
                raise ConfigurationError(
                    f"route {mount!r} holds files in {root}, inside the root {top} of "
                    f"{shell!r}, whose commands could read and change them around any "
                    "permission on the route; mount a folder outside that root"
                )


def _root(backend: Backend) -> str | None:
    root = getattr(backend, "root", None)
    return os.path.normpath(root) if isinstance(root, str) else None


@final
class CompositeBackend:
    """Routes each path to the backend mounted at its longest matching prefix.

    ``CompositeBackend(StateBackend(), routes={"/memories/": StoreBackend(store)})``
    keeps ``/memories/...`` in the store and everything else in state. Prefixes
    match on whole path segments (``/memories2`` is not under ``/memories``); the
    mounted backend sees paths relative to its mount (``/memories/a.md`` is its
    ``/a.md``) and every path in a result is given back in full.

    ``ls`` of a folder shows the mount points inside it beside the default
    backend's entries; ``glob`` and ``grep`` over a folder also search the
    backends mounted below it. ``execute`` goes to the default backend.

    Args:
        default: Serves every path no route claims.
        routes: Mount prefix -> backend.

    Raises:
        InvalidPath: A route prefix that is malformed or is ``/``.
        ConfigurationError: A route's folder lies inside the root of a backend
            here that runs commands (a ``LocalShellBackend``): its commands
            would reach the route's files around any rule about the route.
            Compared on the folders as given (no disk access here).
    """

    def __init__(self, default: Backend, routes: Mapping[str, Backend]) -> None:
        self.default = default
        mounts: dict[str, Backend] = {}
        for prefix, backend in routes.items():
            mount = normalize_path(prefix)
            if mount == "/":
                raise InvalidPath("a route cannot be mounted at '/'; use it as the default")
            mounts[mount] = backend
        _refuse_shell_overlap(default, mounts)
        # Longest first, so the first prefix that matches is the longest one.
        self.routes: dict[str, Backend] = dict(
            sorted(mounts.items(), key=lambda kv: len(kv[0]), reverse=True)
        )

    def __repr__(self) -> str:
        return f"CompositeBackend({self.default!r}, routes={self.routes!r})"

    @property
    def can_execute(self) -> bool:
        """Whether the default backend runs commands."""
        return self.default.can_execute

    def bind(self, state: State, *, name: str = "main") -> CompositeBackend:
        """A composite of the children bound to ``state``."""
        return CompositeBackend(
            self.default.bind(state, name=name),
            {m: b.bind(state, name=name) for m, b in self.routes.items()},
        )

    def _route(self, path: str) -> tuple[Backend, str, str]:
        """The backend for ``path``, its mount ("" for the default), the inner path."""
        for mount, backend in self.routes.items():
            if is_under(path, mount):
                return backend, mount, "/" + relative_to(path, mount)
        return self.default, "", path

    def _below(self, folder: str) -> list[str]:
        """Mounts strictly inside ``folder``."""
        return [m for m in self.routes if m != folder and is_under(m, folder)]

    def _shadowed(self, path: str, mount: str) -> bool:
        """Whether a path served by ``mount`` is really served by a deeper mount."""
        return any(
            is_under(path, m) for m in self.routes if len(m) > len(mount) and is_under(m, mount)
        )

    @staticmethod
    def _outer(mount: str, inner: str) -> str:
        if not mount:
            return inner
        return mount if inner == "/" else mount + inner

    def _info(self, mount: str, info: FileInfo) -> FileInfo:
        return dataclasses.replace(info, path=self._outer(mount, info.path))

    async def resolve_links(self, paths: Sequence[str]) -> list[Resolved]:
        """Where each path leads, asked of the backend serving it (one call per backend)."""
        routed = [self._route(normalize_path(p)) for p in paths]
        out = [Resolved(p) for p in paths]
        groups: dict[str, list[int]] = {}
        for i, (_, mount, _) in enumerate(routed):
            groups.setdefault(mount, []).append(i)
        for mount, indexes in groups.items():
            found = await resolve_links(routed[indexes[0]][0], [routed[i][2] for i in indexes])
            for i, r in zip(indexes, found, strict=True):
                out[i] = Resolved(self._outer(mount, r.real), r.shared)
        return out

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`."""
        path = normalize_path(path)
        backend, mount, inner = self._route(path)
        entries: dict[str, FileInfo] = {}
        below = self._below(path)
        try:
            for info in await backend.ls(inner):
                entries[self._outer(mount, info.path)] = self._info(mount, info)
        except FileNotFound:
            if not below:
                raise
        for m in below:
            child = join(path, relative_to(m, path).split("/", 1)[0])
            entries[child] = FileInfo(path=child, is_dir=True)
        return [entries[k] for k in sorted(entries)]

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        path = normalize_path(path)
        backend, _, inner = self._route(path)
        window = await backend.read(inner, offset=offset, limit=limit)
        return dataclasses.replace(window, path=path)

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        path = normalize_path(path)
        backend, _, inner = self._route(path)
        result = await backend.write(inner, content, expected_version=expected_version)
        return dataclasses.replace(result, path=path)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`."""
        path = normalize_path(path)
        backend, _, inner = self._route(path)
        result = await backend.append(inner, content)
        return dataclasses.replace(result, path=path)

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
        path = normalize_path(path)
        backend, _, inner = self._route(path)
        result = await backend.edit(
            inner, old, new, replace_all=replace_all, expected_version=expected_version
        )
        return dataclasses.replace(result, path=path)

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`.

        Raises:
            InvalidPath: ``path`` is ``/`` or a mount point (roots are not deleted).
        """
        path = normalize_path(path)
        if path in self.routes:
            raise InvalidPath(f"{path} is a mount point and cannot be deleted", path=path)
        backend, _, inner = self._route(path)
        await backend.delete(inner)

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`."""
        path = normalize_path(path)
        if not isinstance(pattern, str):
            raise InvalidPath(f"a glob pattern must be a string, not {type(pattern).__name__}")
        # A relative pattern is rooted at ``path``; an absolute one at "/", with
        # results then kept to ``path``. Mounts below the root get the pattern
        # with their own segments stripped off its front (see strip_mount).
        base = "/" if pattern.startswith("/") else path
        backend, mount, inner = self._route(base)
        found: dict[str, FileInfo] = {}

        async def run(child: Backend, child_mount: str, child_path: str, pat: str) -> None:
            for info in await child.glob(pat, child_path):
                full = self._outer(child_mount, info.path)
                if is_under(full, path) and not self._shadowed(full, child_mount):
                    found[full] = dataclasses.replace(info, path=full)

        # One after the other: few mounts, and an error surfaces as itself rather
        # than inside an exception group.
        await run(backend, mount, inner, pattern)
        for m in self._below(base):
            for residual in await _strip_mount(pattern, relative_to(m, base)):
                await run(self.routes[m], m, "/", residual)
        return [found[k] for k in sorted(found, key=path_key)]

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """See :meth:`Backend.grep`."""
        path = normalize_path(path)
        if glob is not None and not isinstance(glob, str):
            raise InvalidPath(f"a glob filter must be a string, not {type(glob).__name__}")
        backend, mount, inner = self._route(path)
        results: list[tuple[str, GrepResult]] = []

        async def run(child: Backend, child_mount: str, child_path: str, flt: str | None) -> None:
            result = await child.grep(pattern, path=child_path, glob=flt, max_matches=max_matches)
            results.append((child_mount, result))

        below = self._below(path)
        try:
            await run(backend, mount, inner, glob)
        except FileNotFound:
            if not below:
                raise
        for m in below:
            if glob is None or "/" not in glob.strip("/"):
                await run(self.routes[m], m, "/", glob)  # a name filter fits any depth
            else:
                for residual in await _strip_mount(glob, relative_to(m, path)):
                    await run(self.routes[m], m, "/", residual)
        seen: set[tuple[str, int]] = set()
        matches: list[GrepMatch] = []
        truncated = False
        for child_mount, result in results:
            truncated = truncated or result.truncated
            for match in result.matches:
                full = self._outer(child_mount, match.path)
                if (full, match.line_number) in seen or self._shadowed(full, child_mount):
                    continue
                seen.add((full, match.line_number))
                matches.append(dataclasses.replace(match, path=full))
        matches.sort(key=lambda m: (path_key(m.path), m.line_number))
        if len(matches) > max_matches:
            matches, truncated = matches[:max_matches], True
        return GrepResult(matches=tuple(matches), truncated=truncated)

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`."""
        path = normalize_path(path)
        if path in self.routes or self._below(path):
            try:
                return await self._stat_routed(path)
            except FileNotFound:
                return FileInfo(path=path, is_dir=True)
        return await self._stat_routed(path)

    async def _stat_routed(self, path: str) -> FileInfo:
        backend, mount, inner = self._route(path)
        return self._info(mount, await backend.stat(inner))

    async def execute(
        self,
        command: str,
        *,
        timeout: float | None = None,
    ) -> ExecuteResult:
        """Run the command on the default backend (see :meth:`Backend.execute`)."""
        return await self.default.execute(command, timeout=timeout)

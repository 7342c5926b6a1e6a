"""File permissions: rules on which paths an agent may read or write, and a backend that keeps them.

``create_deep_agent(permissions=[FilesystemPermission(...)])`` follows deepagents'
rules: each rule names operations (``read``: ``ls``, ``read_file``, ``glob``,
``grep``; ``write``: ``write_file``, ``edit_file``, ``delete``), glob paths and a
mode (``allow``, ``deny``, ``interrupt``); the first rule that matches decides,
and a path no rule matches is allowed.

:class:`PermissionedBackend` wraps the agent's backend and enforces ``deny``
in every operation, so every file tool (and anything else that goes through the
backend) is held to it: a denied read or write raises
:class:`~deepactors.errors.PermissionDenied`, and ``ls``, ``glob`` and ``grep``
leave denied paths out of their results (they never appear). ``interrupt``
rules are asked about before the call by
:class:`~deepactors.middleware.FilesystemPermissionMiddleware`, through the
human-in-the-loop machinery; the backend lets such paths through.

Path patterns: absolute, matched against normalised paths, segment by segment.
``*`` and ``?`` stay inside a segment, ``[abc]`` is a class, a whole segment
``**`` is any number of folders (none included, so ``/secrets/**`` covers
``/secrets`` itself), ``{a,b}`` is either. Unlike the file tools' ``glob``,
wildcards here also match names starting with a dot: a rule about ``/secrets/**``
covers ``/secrets/.env``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar, final

from deepactors.backends._composite import CompositeBackend
from deepactors.backends._links import APPROVED, LINK_POLICY, LinkPolicy, Resolved, resolve_links
from deepactors.backends._paths import is_under, join, normalize_path, parent, relative_to
from deepactors.backends._protocol import (
    DEFAULT_MAX_MATCHES,
    Backend,
    EditResult,
    ExecuteResult,
    FileInfo,
    GrepResult,
    ReadWindow,
    WriteResult,
)
from deepactors.errors import ConfigurationError, PermissionDenied

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = [
    "FilesystemPermission",
    "Operation",
    "PermissionRules",
    "PermissionedBackend",
    "check_execute",
]

Operation = Literal["read", "write"]
Mode = Literal["allow", "deny", "interrupt"]

T = TypeVar("T")
_WILD = re.compile(r"[*?\[{]")
_GREP_GROWTH = 64  # how much further a filtered grep may look for allowed matches


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FilesystemPermission:
    """One rule: what it covers (operations and path patterns) and what it says.

    Attributes:
        operations: ``"read"`` and/or ``"write"`` (deleting counts as writing).
        paths: Absolute glob patterns (see the module docstring).
        mode: ``"allow"``, ``"deny"``, or ``"interrupt"`` (ask a human first).

    Raises:
        ConfigurationError: An unknown operation or mode, or a pattern that is not
            absolute or contains ``..`` or ``~``.
    """

    operations: Sequence[Operation]
    paths: Sequence[str]
    mode: Mode = "allow"
    patterns: tuple[tuple[re.Pattern[str], str], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.operations, str) or isinstance(self.paths, str):
            raise ConfigurationError("operations and paths must be lists, e.g. paths=['/a/**']")
        bad = set(self.operations) - {"read", "write"}
        if bad or not self.operations:
            raise ConfigurationError(f"operations must be 'read' and/or 'write', not {bad}")
        if self.mode not in ("allow", "deny", "interrupt"):
            raise ConfigurationError(
                f"mode must be 'allow', 'deny' or 'interrupt', not {self.mode!r}"
            )
        if not self.paths:
            raise ConfigurationError("a FilesystemPermission needs at least one path pattern")
        object.__setattr__(self, "operations", tuple(self.operations))
        object.__setattr__(self, "paths", tuple(self.paths))
        compiled = tuple(c for p in self.paths for c in _compile(p))
        object.__setattr__(self, "patterns", compiled)


def _compile(pattern: str) -> list[tuple[re.Pattern[str], str]]:
    """A pattern's regular expressions (one per brace alternative), each with its anchor."""
    if not isinstance(pattern, str) or not pattern.startswith("/"):
        raise ConfigurationError(f"a permission path must start with '/': {pattern!r}")
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    if ".." in segments or "~" in segments or "\0" in pattern or "\\" in pattern:
        raise ConfigurationError(
            f"a permission path must not contain '..', '~' or '\\': {pattern!r}"
        )
    out = []
    for alternative in _expand_braces(pattern):
        parts = [s for s in alternative.split("/") if s not in ("", ".")]
        regex, anchor, literal = [], [], True
        for seg in parts:
            if seg == "**":
                regex.append("(?:/[^/]+)*")
                literal = False
                continue
            if literal and not _WILD.search(seg):
                anchor.append(seg)
            else:
                literal = False
            regex.append("/" + _segment(seg))
        out.append((re.compile("".join(regex)), "/" + "/".join(anchor)))
    return out


def _expand_braces(pattern: str) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth = 0
    for end in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[end], 0)
        if depth == 0:
            break
    else:
        raise ConfigurationError(f"unbalanced '{{' in permission path {pattern!r}")
    options, level, current = [], 0, ""
    for ch in pattern[start + 1 : end]:
        if ch == "," and level == 0:
            options.append(current)
            current = ""
            continue
        level += {"{": 1, "}": -1}.get(ch, 0)
        current += ch
    options.append(current)
    head, tail = pattern[:start], pattern[end + 1 :]
    return [x for option in options for x in _expand_braces(head + option + tail)]


def _segment(seg: str) -> str:
    out, i, n = [], 0, len(seg)
    while i < n:
        c = seg[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (close := seg.find("]", i + 1 if i < n and seg[i] in "!^" else i)) > 0:
            body = seg[i:close].replace("\\", "\\\\")
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"(?!/)[{body}]")
            i = close + 1
        else:
            out.append(re.escape(c))
    return "".join(out)


def _key(path: str) -> str:
    return "" if path == "/" else path


@final
class PermissionRules:
    """An ordered list of :class:`FilesystemPermission`, ready to ask.

    Args:
        rules: The rules, first match wins.
    """

    __slots__ = ("has_interrupt", "rules")

    def __init__(self, rules: Sequence[FilesystemPermission]) -> None:
        if isinstance(rules, FilesystemPermission | str) or not isinstance(rules, Sequence):
            raise ConfigurationError(
                f"permissions must be a list of FilesystemPermission, not {type(rules).__name__}"
            )
        for rule in rules:
            if not isinstance(rule, FilesystemPermission):
                raise ConfigurationError(f"not a FilesystemPermission: {rule!r}")
        self.rules = tuple(rules)
        self.has_interrupt = any(r.mode == "interrupt" for r in self.rules)

    def mode(self, operation: Operation, path: str) -> Mode:
        """What the first rule for ``operation`` matching ``path`` says (``allow`` if none)."""
        key = _key(path)
        for rule in self.rules:
            if operation in rule.operations and any(p.fullmatch(key) for p, _ in rule.patterns):
                return rule.mode
        return "allow"

    def reaches(self, operation: Operation, path: str, mode: Mode, *, inside: bool) -> bool:
        """Whether a rule of ``mode`` could apply to ``path`` or anything below it.

        With ``inside``, only rules that reach strictly below ``path`` count (what
        deleting a folder would touch); without, also those above it (what a
        search under ``path`` could surface). Judged by each pattern's literal
        leading folders, so it errs towards yes.
        """
        for rule in self.rules:
            if rule.mode != mode or operation not in rule.operations:
                continue
            for _, anchor in rule.patterns:
                if is_under(anchor, path) or (not inside and is_under(path, anchor)):
                    return True
        return False

    def covered_by(self, backend: Backend) -> bool:
        """Whether every rule is about paths under a route of a composite ``backend``.

        Then no rule governs the default backend, where ``execute`` runs commands.
        """
        if not isinstance(backend, CompositeBackend) or not backend.routes:
            return False
        return all(
            any(is_under(anchor, mount) for mount in backend.routes)
            for rule in self.rules
            for _, anchor in rule.patterns
        )


@final
class PermissionedBackend:
    """A backend that refuses what the rules deny and leaves denied paths out of listings.

    Args:
        backend: The backend that holds the files.
        rules: The rules (``interrupt`` ones pass here: the middleware asks first).

    Attributes:
        inner: The wrapped backend.
    """

    def __init__(self, backend: Backend, rules: PermissionRules) -> None:
        self.inner = backend
        self.rules = rules
        denies = {
            op: any(r.mode == "deny" and op in r.operations for r in rules.rules)
            for op in ("read", "write")
        }
        # Which operations refuse files with other hard links (see LinkPolicy).
        self._denies = {**denies, "edit": denies["read"] or denies["write"], "stat": False}
        self._shell_ok = backend.can_execute and rules.covered_by(backend)

    def __repr__(self) -> str:
        return f"PermissionedBackend({self.inner!r}, {len(self.rules.rules)} rule(s))"

    @property
    def can_execute(self) -> bool:
        """Whether ``execute`` runs: the inner backend can, and no rule governs its shell."""
        return self._shell_ok

    def bind(self, state: State, *, name: str = "main") -> PermissionedBackend:
        """The inner backend bound to ``state``, under the same rules."""
        return PermissionedBackend(self.inner.bind(state, name=name), self.rules)

    def _require(self, operation: Operation, path: str, doing: str) -> str:
        path = normalize_path(path)
        if self.rules.mode(operation, path) == "deny":
            raise PermissionDenied(
                f"permission denied: {doing} {path} is not allowed by this agent's file "
                "permissions",
                path=path,
            )
        return path

    def _visible(self, path: str) -> bool:
        return self.rules.mode("read", path) != "deny"

    async def resolve_links(self, paths: Sequence[str]) -> list[Resolved]:
        """Where each path leads in the inner backend (see :func:`resolve_links`)."""
        return await resolve_links(self.inner, paths)

    async def _real(
        self, operation: Operation, path: str, doing: str, *, follow: bool = True
    ) -> tuple[str, str]:
        """The path as given and where it leads, each checked against the rules.

        With ``follow`` false the last name is taken as it is (deleting a
        symlink removes the link, not what it points at).

        Raises:
            PermissionDenied: Either is denied, or a link leads into an
                ``interrupt`` area no human approved for this call.
        """
        path = self._require(operation, path, doing)
        if follow or path == "/":
            real = (await resolve_links(self.inner, [path]))[0].real
        else:
            head = (await resolve_links(self.inner, [parent(path)]))[0].real
            real = join(head, path.rsplit("/", 1)[1])
        if real == path:
            return path, real
        mode = self.rules.mode(operation, real)
        if mode == "deny":
            raise PermissionDenied(
                f"permission denied: {doing} {path} leads (through a link) to {real}, which "
                "this agent's file permissions do not allow",
                path=path,
            )
        if mode == "interrupt" and real not in APPROVED.get():
            raise PermissionDenied(
                f"permission denied: {doing} {path} leads (through a link) to {real}, where "
                "a human must approve the call first",
                path=path,
            )
        return path, real

    async def _held(self, kind: str, call: Awaitable[T]) -> T:
        """Run ``call`` (on a real path) refusing any link that appeared since the check."""
        token = LINK_POLICY.set(LinkPolicy(no_hardlinks=self._denies[kind]))
        try:
            return await call
        finally:
            LINK_POLICY.reset(token)

    async def _shown(self, paths: Sequence[str], *, content: bool = False) -> set[str]:
        """Which result paths may be shown: readable where they lead (and, for
        ``content``, not a file with other hard links while reads are denied)."""
        unique = sorted(set(paths))
        found = await resolve_links(self.inner, unique)
        hide_shared = content and self._denies["read"]
        return {
            p
            for p, r in zip(unique, found, strict=True)
            if self._visible(p) and self._visible(r.real) and not (hide_shared and r.shared)
        }

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`; denied entries (also through links) are left out."""
        path, _ = await self._real("read", path, "listing")
        entries = await self.inner.ls(path)
        shown = await self._shown([e.path for e in entries])
        return [e for e in entries if e.path in shown]

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        path, real = await self._real("read", path, "reading")
        found = await self._held("read", self.inner.read(real, offset=offset, limit=limit))
        return dataclasses.replace(found, path=path)

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        path, real = await self._real("write", path, "writing")
        call = self.inner.write(real, content, expected_version=expected_version)
        return dataclasses.replace(await self._held("write", call), path=path)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`."""
        path, real = await self._real("write", path, "appending to")
        found = await self._held("write", self.inner.append(real, content))
        return dataclasses.replace(found, path=path)

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
        path, real = await self._real("write", path, "editing")
        call = self.inner.edit(
            real, old, new, replace_all=replace_all, expected_version=expected_version
        )
        # "edit": an edit reads the file too, so other hard links are refused
        # when either reads or writes are denied somewhere.
        return dataclasses.replace(await self._held("edit", call), path=path)

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`; refused if anything it would delete is write-denied."""
        path, real = await self._real("write", path, "deleting", follow=False)
        if any(self.rules.reaches("write", p, "deny", inside=True) for p in {path, real}):
            raise PermissionDenied(
                f"permission denied: deleting {path} would delete files this agent may not change",
                path=path,
            )
        await self._held("write", self.inner.delete(real))

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`; denied files (also through links) are left out."""
        path, _ = await self._real("read", path, "searching")
        found = await self.inner.glob(pattern, path)
        shown = await self._shown([f.path for f in found])
        return [f for f in found if f.path in shown]

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """See :meth:`Backend.grep`; matches in denied files are left out.

        A match is kept only where its file leads to a readable path and, while
        any rule denies reading, is not a file with other hard links. When the
        matches the inner backend stopped at were partly left out, it is asked
        again for more, so the result is not short of allowed matches.
        """
        path, real = await self._real("read", path, "searching")
        asked = max_matches
        while True:
            # On the real path, refusing links met on it: the folder checked is
            # the one searched (walks never follow the links inside it).
            call = self.inner.grep(pattern, path=real, glob=glob, max_matches=asked)
            found = await self._held("read", call)
            shown = await self._shown([m.path for m in found.matches], content=True)
            kept = tuple(
                dataclasses.replace(m, path=_moved(m.path, real, path))
                for m in found.matches
                if m.path in shown
            )
            enough = len(kept) >= max_matches or not found.truncated
            if enough or asked >= max_matches * _GREP_GROWTH:
                truncated = found.truncated or len(kept) > max_matches
                return GrepResult(matches=kept[:max_matches], truncated=truncated)
            asked *= 4

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`; refused only for a path neither readable nor writable."""
        path = normalize_path(path)
        real = (await resolve_links(self.inner, [path]))[0].real
        for p in {path, real}:
            if self.rules.mode("read", p) == "deny" and self.rules.mode("write", p) == "deny":
                raise PermissionDenied(
                    f"permission denied: {path} is not accessible to this agent", path=path
                )
        found = await self._held("stat", self.inner.stat(real))
        return dataclasses.replace(found, path=path)

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """See :meth:`Backend.execute`; refused unless the rules cover only composite routes."""
        if not self._shell_ok:
            raise PermissionDenied(
                "permission denied: commands could reach files the file permissions govern "
                "(allowed only on a CompositeBackend whose routes hold every rule's paths)"
            )
        return await self.inner.execute(command, timeout=timeout)


def _moved(path: str, real: str, given: str) -> str:
    """``path`` under ``real`` named as under ``given`` (the name the caller used)."""
    return given if path == real else join(given, relative_to(path, real))


def check_execute(rules: PermissionRules, backend: Backend) -> None:
    """Refuse permissions beside a backend that runs commands, unless they are route-scoped.

    Raises:
        ConfigurationError: The backend can execute and a rule reaches its default backend.
    """
    if backend.can_execute and not rules.covered_by(backend):
        raise ConfigurationError(
            "file permissions cannot be enforced on shell commands: with a backend that can "
            "execute, every rule's paths must lie under a route of a CompositeBackend (whose "
            "default backend runs the commands)"
        )

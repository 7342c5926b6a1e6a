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

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from deepactors.backends._composite import CompositeBackend
from deepactors.backends._paths import is_under, normalize_path
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

_WILD = re.compile(r"[*?\[{]")
_GREP_GROWTH = 64  # how much further a filtered grep may look for allowed matches


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

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`; denied entries are left out."""
        path = self._require("read", path, "listing")
        return [e for e in await self.inner.ls(path) if self._visible(e.path)]

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        path = self._require("read", path, "reading")
        return await self.inner.read(path, offset=offset, limit=limit)

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        path = self._require("write", path, "writing")
        return await self.inner.write(path, content, expected_version=expected_version)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`."""
        path = self._require("write", path, "appending to")
        return await self.inner.append(path, content)

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
        path = self._require("write", path, "editing")
        return await self.inner.edit(
            path, old, new, replace_all=replace_all, expected_version=expected_version
        )

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`; refused if anything it would delete is write-denied."""
        path = self._require("write", path, "deleting")
        if self.rules.reaches("write", path, "deny", inside=True):
            raise PermissionDenied(
                f"permission denied: deleting {path} would delete files this agent may not change",
                path=path,
            )
        await self.inner.delete(path)

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`; denied files are left out."""
        path = self._require("read", path, "searching")
        return [f for f in await self.inner.glob(pattern, path) if self._visible(f.path)]

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """See :meth:`Backend.grep`; matches in denied files are left out.

        When the matches the inner backend stopped at were partly denied, it is
        asked again for more, so the result is not short of allowed matches.
        """
        path = self._require("read", path, "searching")
        asked = max_matches
        while True:
            found = await self.inner.grep(pattern, path=path, glob=glob, max_matches=asked)
            kept = tuple(m for m in found.matches if self._visible(m.path))
            enough = len(kept) >= max_matches or not found.truncated
            if enough or asked >= max_matches * _GREP_GROWTH:
                truncated = found.truncated or len(kept) > max_matches
                return GrepResult(matches=kept[:max_matches], truncated=truncated)
            asked *= 4

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`; refused only for a path neither readable nor writable."""
        path = normalize_path(path)
        if self.rules.mode("read", path) == "deny" and self.rules.mode("write", path) == "deny":
            raise PermissionDenied(
                f"permission denied: {path} is not accessible to this agent", path=path
            )
        return await self.inner.stat(path)

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """See :meth:`Backend.execute`; refused unless the rules cover only composite routes."""
        if not self._shell_ok:
            raise PermissionDenied(
                "permission denied: commands could reach files the file permissions govern "
                "(allowed only on a CompositeBackend whose routes hold every rule's paths)"
            )
        return await self.inner.execute(command, timeout=timeout)


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

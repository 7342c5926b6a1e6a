"""The ``Backend`` protocol and the records its operations return.

A backend stores the agent's files somewhere (agent state, a disk folder, a
store) and exposes them through virtual absolute paths (see
:func:`~deepactors.backends.normalize_path`). Every operation is async; a failure
is raised as a :class:`~deepactors.errors.BackendError` subclass carrying the
agent-visible path, never returned as a string.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

from deepactors.errors import ReadBeforeWrite, UnsupportedOperation

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = [
    "ABSENT",
    "DEFAULT_MAX_MATCHES",
    "Backend",
    "EditResult",
    "ExecuteResult",
    "FileInfo",
    "FilesOnly",
    "GrepMatch",
    "GrepResult",
    "ReadWindow",
    "WriteResult",
]

DEFAULT_MAX_MATCHES = 1000
"""How many grep matches a backend returns before it stops and sets ``truncated``."""

ABSENT = "absent"
"""An ``expected_version`` saying the file must not exist yet (no backend's version
token is ever this string)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FileInfo:
    """One file or folder.

    Attributes:
        path: Its virtual absolute path.
        is_dir: True for a folder.
        size: Size in bytes of the UTF-8 content (0 for folders).
        modified: Time of the last change, seconds since the epoch, when known.
        version: The content's version token (as in :attr:`ReadWindow.version`);
            None for folders.
    """

    path: str
    is_dir: bool
    size: int = 0
    modified: float | None = None
    version: str | None = None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadWindow:
    """A page of a text file's lines.

    Lines are split on ``\\n`` only; each line is given without its ``\\n`` or
    ``\\r\\n`` ending. A file ending in a newline has no extra empty last line.

    Attributes:
        path: The file's virtual path.
        lines: The lines of this page.
        start_line: 1-based number of the first line of the page (``offset + 1``).
        end_line: 1-based number of the last line; ``start_line - 1`` when the
            page is empty (``limit=0``, an empty file, or an offset past the end).
        total_lines: How many lines the whole file has.
        next_offset: The ``offset`` that reads the next page, or None at the end.
        version: Opaque token that changes whenever the content changes; the
            file tools use it to enforce "read before write".
    """

    path: str
    lines: tuple[str, ...]
    start_line: int
    end_line: int
    total_lines: int
    next_offset: int | None
    version: str

    @property
    def text(self) -> str:
        """The page's lines joined with ``\\n``."""
        return "\n".join(self.lines)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class WriteResult:
    """What :meth:`Backend.write` did.

    Attributes:
        path: The file's virtual path.
        version: The new content's version token.
        created: True when the file did not exist before.
    """

    path: str
    version: str
    created: bool


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class EditResult:
    """What :meth:`Backend.edit` did.

    Attributes:
        path: The file's virtual path.
        version: The new content's version token.
        replacements: How many occurrences were replaced (1 unless ``replace_all``).
    """

    path: str
    version: str
    replacements: int


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class GrepMatch:
    """One line matching a grep pattern.

    Attributes:
        path: The file's virtual path.
        line_number: 1-based line number.
        line: The whole line, without its line ending.
    """

    path: str
    line_number: int
    line: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class GrepResult:
    """Matches of a grep, ordered by path (tree-walk order), then line number.

    Attributes:
        matches: At most ``max_matches`` matches.
        truncated: True when more matches exist than were returned.
    """

    matches: tuple[GrepMatch, ...]
    truncated: bool


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteResult:
    """The outcome of a shell command.

    Attributes:
        output: stdout and stderr, interleaved as the command wrote them, decoded
            as UTF-8 (undecodable bytes replaced), with a note appended when cut.
        exit_code: The exit status; negative for a signal (POSIX); None when the
            command was killed for running past its timeout.
        truncated: True when the output was cut at the backend's cap.
        timed_out: True when the command ran past its timeout and was killed.
    """

    output: str
    exit_code: int | None
    truncated: bool
    timed_out: bool


@runtime_checkable
class Backend(Protocol):
    """Where an agent's files live.

    Paths are virtual and absolute (``/notes/a.md``); relative paths are taken
    from ``/``. Every method raises a :class:`~deepactors.errors.BackendError`
    subclass on failure: ``InvalidPath`` for a malformed path, ``FileNotFound``,
    ``IsADirectory``, ``NotADirectory``, and so on.

    Glob patterns (:meth:`glob`, and :meth:`grep`'s ``glob`` filter) match whole
    path segments: ``*`` and ``?`` never cross ``/``, ``[abc]`` is a class, and a
    segment ``**`` matches any number of folders (also none). Like a shell, a
    wildcard does not match a leading dot: ``*`` skips ``.env`` and ``**`` does
    not enter ``.git/``; a pattern segment that itself starts with ``.`` (``.*``,
    ``.github``) matches dot-names. ``{a,b}`` within a segment matches either
        alternative (``*.{py,md}``), as a shell expands it.
    """

    @property
    def can_execute(self) -> bool:
        """Whether :meth:`execute` runs commands (otherwise it raises)."""
        ...

    def bind(self, state: State, *, name: str = "main") -> Backend:
        """The backend to use for one agent's run.

        Args:
            state: The agent's state (``StateBackend`` keeps files in it).
            name: The agent's name (``StoreBackend`` may derive its namespace from it).

        Returns:
            A backend bound to that agent; backends that do not depend on the
            agent return themselves.
        """
        ...

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """The entries directly inside a folder, sorted by name.

        Raises:
            FileNotFound: No such folder.
            NotADirectory: ``path`` is a file.
        """
        ...

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """A window of a text file's lines.

        Args:
            path: The file.
            offset: 0-based index of the first line to return.
            limit: Most lines to return; None for all the rest.

        Raises:
            FileNotFound, IsADirectory, BinaryFile, FileTooLarge: As named.
            ValueError: A negative ``offset`` or ``limit``.
        """
        ...

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """Create or replace a file, creating missing parent folders.

        Args:
            path: The file.
            content: The whole new content.
            expected_version: When given, the write happens only if the file's
                current version is this token (:data:`ABSENT`: only if there is
                no file), checked atomically with the write: two writers that
                read the same version cannot both succeed.

        Raises:
            ReadBeforeWrite: The file's version is not ``expected_version``.
            IsADirectory: ``path`` is a folder.
            NotADirectory: A parent on the path is a file.
            FileTooLarge: Over the backend's write limit.
        """
        ...

    async def append(self, path: str, content: str) -> WriteResult:
        """Add ``content`` at the end of a file, creating it (and its folders) if absent.

        For logs that only grow (the conversation history summarization offloads):
        a disk backend writes only the new bytes, so a file appended to ``n``
        times costs its final size in writes, not ``n`` times it. Appends through
        one backend are serialised with its writes and edits, so none is lost.

        Raises:
            IsADirectory: ``path`` is a folder.
            NotADirectory: A parent on the path is a file.
            FileTooLarge: ``content`` is over the backend's write limit.
        """
        ...

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        expected_version: str | None = None,
    ) -> EditResult:
        """Replace an exact string in a file.

        With ``expected_version``, the edit happens only if the file's current
        version is that token, checked atomically with the change (see
        :meth:`write`); otherwise :class:`~deepactors.errors.ReadBeforeWrite`.

        The file's line endings are kept: in a CRLF file, ``old`` and ``new``
        written with ``\\n`` match and are written back with ``\\r\\n``. Nothing
        else in the file changes, so its final newline (or its lack) stays.

        Raises:
            EditError: ``old`` is empty, equal to ``new``, not found, or found more
                than once without ``replace_all``.
            FileNotFound, IsADirectory, BinaryFile: As named.
        """
        ...

    async def delete(self, path: str) -> None:
        """Delete a file, or a folder with everything in it.

        Raises:
            FileNotFound: Nothing at ``path``.
            InvalidPath: ``path`` is ``/`` (a root is never deleted).
        """
        ...

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """Files (not folders) under ``path`` that match ``pattern``, in tree order.

        A relative pattern is matched against paths relative to ``path``; an
        absolute one against the full virtual path.

        Raises:
            InvalidPath: A pattern with ``..`` segments, or a malformed ``path``.
        """
        ...

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """Lines matching a regular expression, searched line by line.

        The pattern is written in Python's :mod:`re` syntax and matched, as by
        ``re.search``, on each line (without its ending), but by a linear-time
        engine (RE2), so no pattern can stall the process: backreferences,
        lookaround, atomic groups, possessive quantifiers, conditionals and
        ``(?x)`` are refused with :class:`~deepactors.errors.InvalidPattern`
        naming the feature, and ``\\b``/``\\B`` treat only ASCII letters, digits
        and ``_`` as word characters (``\\d``, ``\\w``, ``\\s`` are Unicode-aware as
        in :mod:`re`). The search runs in a worker thread.

        Args:
            pattern: The regular expression.
            path: A folder to search under, or a single file.
            glob: Only files matching this; a pattern without ``/`` matches file
                names at any depth (``*.py``), one with ``/`` matches paths
                relative to ``path``.
            max_matches: Stop after this many matches (``truncated`` is then set).

        Binary files and files over the backend's read limit are skipped.

        Raises:
            InvalidPattern: The regular expression does not compile, is too
                large, or uses a feature the engine does not have.
            FileNotFound: Nothing at ``path``.
        """
        ...

    async def stat(self, path: str) -> FileInfo:
        """Facts about one file or folder.

        Raises:
            FileNotFound: Nothing at ``path``.
        """
        ...

    async def execute(
        self,
        command: str,
        *,
        timeout: float | None = None,
    ) -> ExecuteResult:
        """Run a shell command, when :attr:`can_execute` is true.

        Raises:
            UnsupportedOperation: This backend cannot run commands.
        """
        ...


class FilesOnly:
    """For backends that keep files but cannot run commands.

    Gives the ``can_execute = False`` half of the protocol and the ``execute``
    that refuses, once, instead of in every such backend.
    """

    can_execute = False

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """Always raises: this backend cannot run commands.

        Raises:
            UnsupportedOperation: Always (use :class:`LocalShellBackend` to run commands).
        """
        raise UnsupportedOperation(f"{type(self).__name__} cannot run commands")


def check_version(path: str, expected: str | None, current: str | None) -> None:
    """Refuse a change whose ``expected_version`` is not the file's current one.

    Args:
        path: The file's virtual path.
        expected: The caller's ``expected_version`` (None: no check).
        current: The file's version now; None when it does not exist.

    Raises:
        ReadBeforeWrite: They differ.
    """
    if expected is None or expected == (current or ABSENT):
        return
    if current is None:
        message = f"{path} no longer exists (someone deleted it since you read it)"
    elif expected == ABSENT:
        message = f"{path} was just created by someone else: call read_file on it first"
    else:
        message = (
            f"{path} has changed since you last read it (someone else wrote to it): call "
            "read_file on it again, then retry with the current content"
        )
    raise ReadBeforeWrite(message, path=path)


def _check_window(offset: int, limit: int | None) -> None:
    if offset < 0:
        raise ValueError(f"offset must be >= 0, not {offset}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")


def make_window(
    path: str, lines: Sequence[str], offset: int, limit: int | None, version: str
) -> ReadWindow:
    """Cut a :class:`ReadWindow` out of a file's lines."""
    _check_window(offset, limit)
    total = len(lines)
    stop = total if limit is None else min(total, offset + limit)
    page = tuple(lines[offset:stop]) if offset < total else ()
    start = offset + 1
    end_offset = offset + len(page)
    return ReadWindow(
        path=path,
        lines=page,
        start_line=start,
        end_line=start + len(page) - 1,
        total_lines=total,
        next_offset=end_offset if end_offset < total else None,
        version=version,
    )

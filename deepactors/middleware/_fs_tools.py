"""The file tools: ls, read_file, write_file, edit_file, delete, glob, grep, execute.

Each tool turns a backend's typed errors into a :class:`~deepactors.errors.ToolError`
whose message the model reads, so a refused path or a missing file never ends a
run. Read-before-write is enforced here, against a per-actor record of versions,
and passed down as the backend's ``expected_version``, so the check and the
change are one atomic step in the backend.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, ParamSpec

import anyio

from ..backends import ABSENT, Backend, SandboxKey, check_version, normalize_path, sandbox_scope
from ..context import RunContext, RunKey, ToolRuntime
from ..errors import BackendError, FileNotFound, ReadBeforeWrite, ToolError
from ..state import Channel
from ..tools import Tool, tool
from ._fs_format import (
    clip_lines,
    format_entries,
    format_execute,
    format_grep,
    format_read,
)

__all__ = [
    "GLOB_DESCRIPTION",
    "READS_CHANNEL",
    "FileToolLimits",
    "make_file_tools",
    "read_versions",
    "reads_channel",
    "sandbox_key",
]

GLOB_DESCRIPTION = """\
Find files whose paths match a glob pattern, such as `**/*.py` or `/docs/*.md`.

A relative pattern is matched against paths relative to `path`; an absolute one
against the whole path. `*` and `?` match within one path segment (never `/`),
`[abc]` is a character class, a `**` segment matches any number of folders,
none included, and `{a,b}` matches either alternative (`**/*.{py,md}`,
`{src,tests}/**`). Dotfiles: as in a shell,
wildcards do not match a leading dot, so `*` skips `.env` and `**` does not enter
`.git/`; write the dot to match them (`.*`, `**/.env`, `.github/**`)."""

P = ParamSpec("P")

_READS: RunKey[dict[str, str]] = RunKey("FilesystemMiddleware.read_versions", dict)
_LOCK: RunKey[anyio.Lock] = RunKey("FilesystemMiddleware.write_lock", anyio.Lock)


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Turn backend refusals into the error result the model reads."""
    try:
        yield
    except BackendError as exc:
        raise ToolError(str(exc)) from exc
    except ValueError as exc:  # bad offsets and the like, from a backend's own checks
        raise ToolError(f"invalid argument: {exc}") from exc


READS_CHANNEL = "file_reads"
"""The private state channel holding an agent's record of what it read."""


def _merge_reads(current: dict[str, str], update: Mapping[str, str | None]) -> dict[str, str]:
    for path, version in update.items():
        if version is None:
            current.pop(path, None)
        else:
            current[path] = version
    return current


def reads_channel() -> Channel:
    """The ``file_reads`` channel: path -> version token of the last read or write.

    Thread state like the rest: checkpointed, so a read survives a new run of
    the thread and a resume after an interrupt; a subagent starts with its own.
    """
    return Channel(reducer=_merge_reads, default=dict, private=True)


def read_versions(runtime: ToolRuntime) -> Mapping[str, str]:
    """This actor's record of the version of each file it read (or wrote) last.

    Kept in the actor's state (``file_reads``), so it is per agent (a subagent
    has its own, and reads never leak between agents) and per thread (it
    survives runs and resumes). A tool called without an agent's state keeps
    it per run instead.
    """
    state = runtime.state
    if state is not None and READS_CHANNEL in state:
        reads: Mapping[str, str] = state[READS_CHANNEL]
        return reads
    return runtime.run.local(_READS)


def _remember(runtime: ToolRuntime, update: Mapping[str, str | None]) -> None:
    """Record reads (a version) and forgettings (None), through the state when there is one."""
    state = runtime.state
    if state is not None and READS_CHANNEL in state:
        state.apply({READS_CHANNEL: dict(update)})
    else:
        _merge_reads(runtime.run.local(_READS), update)


def _write_lock(run: RunContext) -> anyio.Lock:
    """This actor's lock around check-then-change of its file tools.

    One agent's parallel edits of a file in one turn run one after another, so
    the second sees the version the first recorded instead of being refused as
    a change by "someone else". Other agents do not share it: between agents the
    backend's ``expected_version`` check refuses the later writer.
    """
    return run.local(_LOCK)


async def _expected_version(
    backend: Backend, path: str, reads: Mapping[str, str], *, new_ok: bool
) -> str | None:
    """The version the change of ``path`` must find, once this agent may change it.

    Returns :data:`~deepactors.backends.ABSENT` for a new file (so two agents
    creating the same file cannot both succeed), the version last read for an
    existing one, and None when the backend has no version to check (a folder,
    which the write itself refuses, or a backend without version tokens).

    Raises:
        ReadBeforeWrite: The file exists and was not read, or changed since.
        FileNotFound: No file, and ``new_ok`` is false.
    """
    try:
        info = await backend.stat(path)
    except FileNotFound:
        if new_ok:
            return ABSENT
        raise
    if info.is_dir:
        return None  # the write itself refuses a folder, with a clearer message
    seen = reads.get(path)
    if seen is None:
        raise ReadBeforeWrite(
            f"{path} already exists and you have not read it: call read_file on it first, "
            "then retry (this keeps you from overwriting what you have not seen)",
            path=path,
        )
    # A backend without version tokens can only tell "read at all".
    if info.version is None:
        return None
    check_version(path, seen, info.version)
    return seen


def sandbox_key(runtime: ToolRuntime) -> SandboxKey:
    """Whose sandbox a tool call works in: its thread (or run) and its caller's identity."""
    run = runtime.run
    return SandboxKey.for_run(run.thread_id, run.root.run_id, runtime.identity)


def _in_sandbox(fn: Callable[P, Awaitable[str]]) -> Callable[P, Awaitable[str]]:
    """Run a file tool's backend calls in its thread's sandbox (a per-thread backend's key).

    Backends that are not per thread ignore the key.
    """

    @functools.wraps(fn)
    async def scoped(*args: P.args, **kwargs: P.kwargs) -> str:
        runtime = kwargs["runtime"]
        assert isinstance(runtime, ToolRuntime)
        with sandbox_scope(sandbox_key(runtime)):
            return await fn(*args, **kwargs)

    return scoped


_Resolve = Callable[[ToolRuntime], Backend]
"""The backend for a tool call (raises ToolError when there is none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileToolLimits:
    """The limits the file tools apply (see :class:`FilesystemMiddleware`)."""

    read_limit_default: int
    max_line_chars: int
    max_chars: int | None
    grep_max_matches: int
    max_entries: int


def make_file_tools(
    resolve: Callable[[ToolRuntime], Backend], limits: FileToolLimits, *, with_execute: bool
) -> tuple[Tool, ...]:
    """The file tools, as closures over one middleware's backend and limits.

    Closures rather than module-level tools: the limits are per middleware, and a
    signature default (read_file's ``limit``) is what the model sees in the schema.

    Args:
        resolve: The backend for a tool call (raises ToolError when there is none).
        limits: The middleware's limits.
        with_execute: Whether to add the ``execute`` tool.
    """
    made = [
        _ls_tool(resolve, limits),
        _read_file_tool(resolve, limits),
        _write_file_tool(resolve),
        _edit_file_tool(resolve),
        _delete_tool(resolve),
        _glob_tool(resolve, limits),
        _grep_tool(resolve, limits),
    ]
    if with_execute:
        made.append(_execute_tool(resolve))
    return tuple(made)


def _ls_tool(resolve: _Resolve, limits: FileToolLimits) -> Tool:
    """The ``ls`` tool: a folder's entries, clipped to the limits."""

    async def ls(path: str = "/", *, runtime: ToolRuntime) -> str:
        """List the files and folders directly inside a folder, with file sizes.

        Args:
            path: Absolute path of the folder; "/" is the top.
        """
        backend = resolve(runtime)
        with _tool_errors():
            entries = await backend.ls(path)
        if not entries:
            return f"{normalize_path(path)} is empty."
        lines = format_entries(entries, limit=limits.max_entries)
        return clip_lines(lines, max_chars=limits.max_chars, what="the path")

    return tool(_in_sandbox(ls))


def _read_file_tool(resolve: _Resolve, limits: FileToolLimits) -> Tool:
    """The ``read_file`` tool: a page of numbered lines; records the version read."""

    async def read_file(
        file_path: str,
        offset: int = 0,
        limit: int = limits.read_limit_default,
        *,
        runtime: ToolRuntime,
    ) -> str:
        """Read a text file as numbered lines ("<number><tab><line>"), a page at a time.

        The numbers are not part of the file: leave them out of edit_file strings.
        Very long lines are clipped. When more lines follow, the last line of the
        result says which offset to read next.

        Args:
            file_path: Absolute path of the file.
            offset: Number of lines to skip (0 starts at line 1).
            limit: Most lines to show.
        """
        if offset < 0 or limit < 0:
            raise ToolError("offset and limit must be 0 or more")
        backend = resolve(runtime)
        with _tool_errors():
            path = normalize_path(file_path)
            window = await backend.read(path, offset=offset, limit=limit)
        total = window.total_lines
        if total == 0:
            _remember(runtime, {path: window.version})
            return f"{path} exists but is empty (0 lines)."
        if limit == 0:
            return f"No lines shown (limit=0). {path} has {total} lines."
        if not window.lines:
            raise ToolError(
                f"offset={offset} is past the end of {path}, which has {total} lines; "
                f"use an offset from 0 to {total - 1}"
            )
        _remember(runtime, {path: window.version})
        return format_read(window, max_line_chars=limits.max_line_chars, max_chars=limits.max_chars)

    return tool(_in_sandbox(read_file))


def _write_file_tool(resolve: _Resolve) -> Tool:
    """The ``write_file`` tool: creates a file, or replaces one the agent read."""

    async def write_file(file_path: str, content: str, *, runtime: ToolRuntime) -> str:
        """Create a file, or replace one you have read, with this content.

        Missing parent folders are created. To change part of a file, prefer edit_file.

        Args:
            file_path: Absolute path of the file.
            content: The whole new content.
        """
        backend = resolve(runtime)
        reads = read_versions(runtime)
        with _tool_errors():
            path = normalize_path(file_path)
            async with _write_lock(runtime.run):
                expected = await _expected_version(backend, path, reads, new_ok=True)
                result = await backend.write(path, content, expected_version=expected)
                _remember(runtime, {path: result.version})
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Created" if result.created else "Replaced"
        return f"{verb} {path} ({lines} line{'s' if lines != 1 else ''})."

    return tool(_in_sandbox(write_file))


def _edit_file_tool(resolve: _Resolve) -> Tool:
    """The ``edit_file`` tool: replaces a string in a file the agent read."""

    async def edit_file(
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
        *,
        runtime: ToolRuntime,
    ) -> str:
        """Replace an exact string in a file you have read.

        old_string must match the file exactly (indentation included, without the
        line numbers read_file shows) and occur once, unless replace_all is set.
        The file's line endings and final newline are kept as they are.

        Args:
            file_path: Absolute path of the file.
            old_string: The exact text to replace.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of exactly one.
        """
        backend = resolve(runtime)
        reads = read_versions(runtime)
        with _tool_errors():
            path = normalize_path(file_path)
            async with _write_lock(runtime.run):
                try:
                    expected = await _expected_version(backend, path, reads, new_ok=False)
                except FileNotFound:
                    raise ToolError(
                        f"no file at {path}; use write_file to create a new file"
                    ) from None
                result = await backend.edit(
                    path,
                    old_string,
                    new_string,
                    replace_all=replace_all,
                    expected_version=expected,
                )
                _remember(runtime, {path: result.version})
        n = result.replacements
        return f"Edited {path}: {n} replacement{'s' if n != 1 else ''}."

    return tool(_in_sandbox(edit_file))


def _delete_tool(resolve: _Resolve) -> Tool:
    """The ``delete`` tool: removes a file or folder and forgets its reads."""

    async def delete(file_path: str, *, runtime: ToolRuntime) -> str:
        """Delete a file, or a folder with everything in it.

        Args:
            file_path: Absolute path of the file or folder.
        """
        backend = resolve(runtime)
        with _tool_errors():
            path = normalize_path(file_path)
            await backend.delete(path)
        reads = read_versions(runtime)
        inside = path.rstrip("/") + "/"
        gone = [p for p in reads if p == path or p.startswith(inside)]
        if gone:
            _remember(runtime, dict.fromkeys(gone))
        return f"Deleted {path}."

    return tool(_in_sandbox(delete))


def _glob_tool(resolve: _Resolve, limits: FileToolLimits) -> Tool:
    """The ``glob`` tool: files matching a pattern (the model reads GLOB_DESCRIPTION)."""

    async def glob(pattern: str, path: str = "/", *, runtime: ToolRuntime) -> str:
        """Find files matching a glob pattern (the model reads GLOB_DESCRIPTION).

        Args:
            pattern: The glob pattern.
            path: Absolute path of the folder to search under.
        """
        backend = resolve(runtime)
        with _tool_errors():
            found = await backend.glob(pattern, path)
        if not found:
            return f"No files match {pattern!r} under {normalize_path(path)}."
        lines = format_entries(found, limit=limits.max_entries)
        return clip_lines(lines, max_chars=limits.max_chars, what="the pattern or path")

    return tool(description=GLOB_DESCRIPTION)(_in_sandbox(glob))


def _grep_tool(resolve: _Resolve, limits: FileToolLimits) -> Tool:
    """The ``grep`` tool: lines matching a regular expression."""

    async def grep(
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        output_mode: Literal["files_with_matches", "content", "count"] = "files_with_matches",
        *,
        runtime: ToolRuntime,
    ) -> str:
        """Search file contents for a regular expression, line by line.

        Dotfiles and dot-folders are searched too; binary files and files too large
        to read are skipped.

        Args:
            pattern: A regular expression in Python syntax, searched in each
                line. No backreferences or lookaround (the engine is RE2).
            path: Absolute path of a folder to search under, or of one file.
            glob: Only search files matching this glob ("*.py" matches names at
                any depth; a pattern with "/" matches paths relative to path).
            output_mode: "files_with_matches" lists the files; "content" shows
                each matching line as path:line_number:text; "count" gives the
                number of matching lines per file.
        """
        backend = resolve(runtime)
        with _tool_errors():
            result = await backend.grep(
                pattern, path=path, glob=glob, max_matches=limits.grep_max_matches
            )
        if not result.matches:
            where = normalize_path(path) + (f" in files matching {glob!r}" if glob else "")
            return f"No matches for {pattern!r} under {where}."
        lines = format_grep(result, mode=output_mode, max_line_chars=limits.max_line_chars)
        return clip_lines(lines, max_chars=limits.max_chars, what="the pattern, path or glob")

    return tool(_in_sandbox(grep))


def _execute_tool(resolve: _Resolve) -> Tool:
    """The ``execute`` tool: a shell command in the workspace folder."""

    async def execute(command: str, timeout: float | None = None, *, runtime: ToolRuntime) -> str:
        """Run a shell command in the workspace folder; returns its output and exit code.

        The workspace folder is the file tools' "/". stdout and stderr come back
        together; very long output is cut with a note. The command is killed
        (with the processes it started) when it runs past the timeout. Commands
        cannot read input: use non-interactive flags.

        Args:
            command: A shell command line, run with `sh -c`.
            timeout: Seconds before it is killed; the workspace default when omitted.
        """
        if timeout is not None and timeout <= 0:
            raise ToolError("timeout must be more than 0 seconds")
        backend = resolve(runtime)
        with _tool_errors():
            result = await backend.execute(command, timeout=timeout)
        return format_execute(result)

    return tool(_in_sandbox(execute))

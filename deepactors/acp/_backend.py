"""``EditorBackend``: an ACP session's files, read and written through the editor.

The agent's ``/`` is the session's working folder. When the client offers
``fs.readTextFile`` / ``fs.writeTextFile``, reads and writes (and so edits)
go through it, so the agent sees the editor's buffers, unsaved changes
included, and the editor sees (and can show, and undo) each write; when it
offers a ``terminal``, commands run in the editor's terminal. Listing, globs,
grep and deletes, and whatever the client does not offer, act on the folder
on disk (``FilesystemBackend``, or ``LocalShellBackend`` for commands).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

import anyio

from .._core.jsonvalue import JSONValue
from ..backends import (
    ABSENT,
    DEFAULT_MAX_MATCHES,
    Backend,
    EditResult,
    ExecuteResult,
    FileInfo,
    FilesystemBackend,
    GrepResult,
    LocalShellBackend,
    ReadWindow,
    WriteResult,
    apply_edit,
    check_version,
    normalize_path,
    split_lines,
)
from ..errors import UnsupportedOperation
from ._rpc import INTERNAL_ERROR, Peer, RpcError

if TYPE_CHECKING:
    from ..state import State

__all__ = ["ClientOffers", "EditorBackend"]

DEFAULT_COMMAND_TIMEOUT = 120.0
"""Seconds a command in the editor's terminal may run, unless a call says otherwise."""
TERMINAL_OUTPUT_BYTES = 1024 * 1024
"""The most output the editor keeps of a command (its ``outputByteLimit``)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOffers:
    """What the client said it can do (``initialize``'s ``clientCapabilities``)."""

    read: bool = False
    write: bool = False
    terminal: bool = False

    @classmethod
    def of(cls, capabilities: object) -> ClientOffers:
        """From ``clientCapabilities`` as sent (anything else: nothing offered)."""
        if not isinstance(capabilities, dict):
            return cls()
        given = capabilities.get("fs")
        fs: dict[str, object] = given if isinstance(given, dict) else {}
        return cls(
            read=fs.get("readTextFile") is True,
            write=fs.get("writeTextFile") is True,
            terminal=capabilities.get("terminal") is True,
        )


def _version(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()[:32]


@final
class EditorBackend:
    """The files of one ACP session (see the module docstring).

    Args:
        peer: The connection to the client.
        session_id: The session the requests are about.
        cwd: The session's working folder (absolute): the agent's ``/``.
        offers: What the client offers.
        execute: Whether the agent runs commands (its own backend could).
    """

    def __init__(
        self, peer: Peer, session_id: str, cwd: str, offers: ClientOffers, *, execute: bool
    ) -> None:
        self._peer = peer
        self._session = session_id
        self.cwd = cwd
        self._offers = offers
        self._execute = execute
        self._disk: Backend = LocalShellBackend(root=cwd) if execute else FilesystemBackend(cwd)
        self._lock = anyio.Lock()  # a read-modify-write through the client at a time

    def __repr__(self) -> str:
        return f"<EditorBackend session {self._session!r} at {self.cwd!r}>"

    def real_path(self, path: str) -> str:
        """The absolute path on the client's machine of a virtual path."""
        virtual = normalize_path(path)
        return self.cwd if virtual == "/" else os.path.join(self.cwd, virtual.lstrip("/"))

    @property
    def can_execute(self) -> bool:
        """Whether commands run (in the editor's terminal, or on disk)."""
        return self._execute

    def bind(self, state: State, *, name: str = "main") -> Backend:
        """Itself: the session's files do not depend on the agent's state."""
        return self

    # -- through the client ----------------------------------------------------------

    async def _content(self, path: str) -> str | None:
        """The file's text as the editor has it; None when it does not exist."""
        if self._offers.read:
            try:
                result = await self._peer.request(
                    "fs/read_text_file", {"sessionId": self._session, "path": self.real_path(path)}
                )
            except RpcError:
                pass  # the client refuses what it cannot read: the disk says why
            else:
                content = result.get("content") if isinstance(result, dict) else None
                return content if isinstance(content, str) else ""
        try:
            window = await self._disk.read(path)
        except FileNotFoundError:
            return None
        return window.text + ("\n" if window.lines else "")

    async def _put(self, path: str, content: str) -> None:
        if not self._offers.write:
            await self._disk.write(path, content)
            return
        await self._peer.request(
            "fs/write_text_file",
            {"sessionId": self._session, "path": self.real_path(path), "content": content},
        )

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """A window of the file's lines as the editor has them."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError("offset and limit must be >= 0")
        virtual = normalize_path(path)
        if not self._offers.read:
            return await self._disk.read(virtual, offset=offset, limit=limit)
        content = await self._content(virtual)
        if content is None:
            return await self._disk.read(virtual, offset=offset, limit=limit)  # its error
        lines = split_lines(content)
        end = len(lines) if limit is None else min(len(lines), offset + limit)
        page = tuple(lines[offset:end])
        return ReadWindow(
            path=virtual,
            lines=page,
            start_line=offset + 1,
            end_line=offset + len(page),
            total_lines=len(lines),
            next_offset=end if end < len(lines) else None,
            version=_version(content),
        )

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """Write the file through the editor (after the version check, if asked)."""
        virtual = normalize_path(path)
        async with self._lock:
            current = await self._content(virtual)
            if expected_version is not None:
                found = ABSENT if current is None else _version(current)
                check_version(virtual, expected_version, found)
            await self._put(virtual, content)
        return WriteResult(path=virtual, version=_version(content), created=current is None)

    async def append(self, path: str, content: str) -> WriteResult:
        """Add to the end of the file (made if absent)."""
        virtual = normalize_path(path)
        async with self._lock:
            current = await self._content(virtual)
            text = (current or "") + content
            await self._put(virtual, text)
        return WriteResult(path=virtual, version=_version(text), created=current is None)

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        expected_version: str | None = None,
    ) -> EditResult:
        """Replace a string in the file as the editor has it, and write it back."""
        virtual = normalize_path(path)
        async with self._lock:
            current = await self._content(virtual)
            if current is None:
                await self._disk.read(virtual)  # FileNotFound, as the tools expect
                raise FileNotFoundError(virtual)
            check_version(virtual, expected_version, _version(current))
            text, count = apply_edit(current, old, new, replace_all=replace_all, path=virtual)
            await self._put(virtual, text)
        return EditResult(path=virtual, version=_version(text), replacements=count)

    # -- on disk ---------------------------------------------------------------------

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """The folder's entries, on disk."""
        return await self._disk.ls(path)

    async def delete(self, path: str) -> None:
        """Delete on disk."""
        await self._disk.delete(path)

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """Files matching ``pattern``, on disk."""
        return await self._disk.glob(pattern, path)

    async def grep(
        self,
        pattern: str,
        *,
        path: str = "/",
        glob: str | None = None,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> GrepResult:
        """Lines matching ``pattern``, on disk."""
        return await self._disk.grep(pattern, path=path, glob=glob, max_matches=max_matches)

    async def stat(self, path: str) -> FileInfo:
        """Facts about a file or folder, on disk."""
        return await self._disk.stat(path)

    # -- commands --------------------------------------------------------------------

    async def execute(self, command: str, *, timeout: float | None = None) -> ExecuteResult:
        """Run ``command`` in the editor's terminal (or on disk, when it offers none)."""
        if not self._execute:
            raise UnsupportedOperation("this agent does not run commands")
        if not self._offers.terminal:
            return await self._disk.execute(command, timeout=timeout)
        session = self._session
        created = await self._peer.request(
            "terminal/create",
            {
                "sessionId": session,
                "command": "sh",
                "args": ["-c", command],
                "cwd": self.cwd,
                "outputByteLimit": TERMINAL_OUTPUT_BYTES,
            },
        )
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if terminal_id is None:
            raise RpcError(INTERNAL_ERROR, f"terminal/create answered no terminalId: {created!r}")
        terminal = {"sessionId": session, "terminalId": terminal_id}
        timed_out = False
        try:
            exited: JSONValue = None
            with anyio.move_on_after(timeout or DEFAULT_COMMAND_TIMEOUT):
                exited = await self._peer.request("terminal/wait_for_exit", terminal)
            if exited is None:
                timed_out = True
                await self._peer.request("terminal/kill", terminal)
            output = await self._peer.request("terminal/output", terminal)
        finally:
            # The terminal goes with the session if the client cannot release it.
            with anyio.CancelScope(shield=True), contextlib.suppress(RpcError, TimeoutError):
                await self._peer.request("terminal/release", terminal, timeout=5)
        code = None if timed_out or not isinstance(exited, dict) else exited.get("exitCode")
        return ExecuteResult(
            output=str(output.get("output", "")) if isinstance(output, dict) else "",
            exit_code=code if isinstance(code, int) else None,
            truncated=bool(output.get("truncated")) if isinstance(output, dict) else False,
            timed_out=timed_out,
        )

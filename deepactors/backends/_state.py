"""``StateBackend``: files kept in the agent's ``files`` state channel."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import anyio.lowlevel

from deepactors.errors import FileNotFound, InvalidPath, IsADirectory, UnsupportedOperation
from deepactors.state import FileRecord

from ._paths import normalize_path
from ._protocol import (
    DEFAULT_MAX_MATCHES,
    EditResult,
    FileInfo,
    FilesOnly,
    GrepResult,
    ReadWindow,
    WriteResult,
    check_version,
    make_window,
)
from ._text import apply_edit, split_lines
from ._tree import (
    check_writable,
    glob_paths_in_thread,
    grep_contents_in_thread,
    is_folder,
    list_folder,
    paths_under,
)

if TYPE_CHECKING:
    from deepactors.state import State

__all__ = ["StateBackend"]


def _version(record: FileRecord) -> str:
    """The version token: the change count plus the creation time.

    ``FileRecord.version`` restarts at 1 when a file is deleted and created
    again; with the creation time in the token an old read never passes for a
    read of the new file.
    """
    return f"{record.version}@{record.created_at!r}"


def _info(path: str, record: FileRecord) -> FileInfo:
    return FileInfo(
        path=path,
        is_dir=False,
        size=len(record.content.encode()),
        modified=record.modified_at,
        version=_version(record),
    )


@final
class StateBackend(FilesOnly):
    """Files in the agent's ``files`` state channel (the default backend).

    Files travel with the state: they are checkpointed with it, and a subagent
    works on a copy whose changes come back as a diff. Every change goes through
    ``state.apply({"files": {...}})``, so the ``files`` reducer sees it and each
    change bumps the file's version (:meth:`FileRecord.changed`). Folders are
    implicit: a path is a folder when some file lies under it.

    Each operation does its read and its write without awaiting in between, so
    concurrent edits in one event loop never lose an update.

    Args:
        state: The state to work on. ``create_deep_agent`` passes an unbound
            ``StateBackend()`` and the runtime calls :meth:`bind` for each run.
    """

    def __init__(self, state: State | None = None) -> None:
        self._state = state

    def __repr__(self) -> str:
        return f"StateBackend(bound={self._state is not None})"

    def bind(self, state: State, *, name: str = "main") -> StateBackend:
        """A backend working on ``state``."""
        return StateBackend(state)

    def _files(self) -> dict[str, FileRecord]:
        if self._state is None:
            raise UnsupportedOperation(
                "this StateBackend is not bound to a state; call backend.bind(state) first"
            )
        return self._state.files

    def _record(self, path: str) -> FileRecord:
        files = self._files()
        record = files.get(path)
        if record is None:
            if is_folder(files, path):
                raise IsADirectory(f"{path} is a folder", path=path)
            raise FileNotFound(f"no file at {path}", path=path)
        return record

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.ls`."""
        path = normalize_path(path)
        await anyio.lowlevel.checkpoint()
        return list_folder(self._files(), path, _info)

    async def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadWindow:
        """See :meth:`Backend.read`."""
        path = normalize_path(path)
        await anyio.lowlevel.checkpoint()
        record = self._record(path)
        return make_window(path, split_lines(record.content), offset, limit, _version(record))

    async def write(
        self, path: str, content: str, *, expected_version: str | None = None
    ) -> WriteResult:
        """See :meth:`Backend.write`."""
        path = normalize_path(path)
        await anyio.lowlevel.checkpoint()
        # From here to apply() nothing awaits: the checks and the change are one step.
        files = self._files()
        check_writable(files, path)
        old = files.get(path)
        check_version(path, expected_version, None if old is None else _version(old))
        record = FileRecord.written(old, content)
        self._apply({path: record})
        return WriteResult(path=path, version=_version(record), created=old is None)

    async def append(self, path: str, content: str) -> WriteResult:
        """See :meth:`Backend.append`.

        A state file is one string, so the new record holds a copy of the whole
        content; it remembers where the old content ended, so a checkpoint stores
        only the added text.
        """
        path = normalize_path(path)
        await anyio.lowlevel.checkpoint()
        # From here to apply() nothing awaits: no other change slips in between.
        files = self._files()
        check_writable(files, path)
        old = files.get(path)
        record = FileRecord(content=content) if old is None else old.appended(content)
        self._apply({path: record})
        return WriteResult(path=path, version=_version(record), created=old is None)

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
        await anyio.lowlevel.checkpoint()
        record = self._record(path)
        check_version(path, expected_version, _version(record))
        content, count = apply_edit(record.content, old, new, replace_all=replace_all, path=path)
        changed = record.changed(content)
        self._apply({path: changed})
        return EditResult(path=path, version=_version(changed), replacements=count)

    async def delete(self, path: str) -> None:
        """See :meth:`Backend.delete`."""
        path = normalize_path(path)
        if path == "/":
            raise InvalidPath("the root folder '/' cannot be deleted", path=path)
        await anyio.lowlevel.checkpoint()
        files = self._files()
        doomed = paths_under(files, path)
        if not doomed:
            raise FileNotFound(f"nothing at {path}", path=path)
        self._apply(dict.fromkeys(doomed))

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :meth:`Backend.glob`."""
        path = normalize_path(path)
        await anyio.lowlevel.checkpoint()
        files = self._files()
        return [_info(p, files[p]) for p in await glob_paths_in_thread(tuple(files), pattern, path)]

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
        await anyio.lowlevel.checkpoint()
        contents = {p: r.content for p, r in self._files().items()}
        return await grep_contents_in_thread(
            contents, pattern, path=path, glob=glob, max_matches=max_matches
        )

    async def stat(self, path: str) -> FileInfo:
        """See :meth:`Backend.stat`."""
        path = normalize_path(path)
        await anyio.lowlevel.checkpoint()
        files = self._files()
        record = files.get(path)
        if record is not None:
            return _info(path, record)
        if is_folder(files, path):
            return FileInfo(path=path, is_dir=True)
        raise FileNotFound(f"nothing at {path}", path=path)

    def _apply(self, update: dict[str, FileRecord | None]) -> None:
        assert self._state is not None
        self._state.apply({"files": update})

"""The ``files`` channel at each edge: input, a tool's update, a subagent's diff, checkpoints.

Its value maps absolute paths to :class:`~deepactors.filediff.FileRecord`. What
reaches the reducer is always a plain ``{path: record | None}`` mapping: user
input and tool updates are converted into one here, a subagent's
:class:`~deepactors.filediff.FileDiff` is resolved into one with
:func:`~deepactors.filediff.merge`, and an append read back from a checkpoint is
tied to the record it grew from. A tool's update is checked against any
mapping with a ``files`` entry, not a ``State``: the state module builds on this
one, not the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .._core.jsonvalue import JSONObject
from ..errors import InputError
from ..filediff import FileChange, FileDiff, FileRecord, MergeResult, merge

__all__ = [
    "check_files",
    "coerce_files",
    "decode_files",
    "encode_files",
    "merge_files",
    "resolve_files",
]


def merge_files(
    current: dict[str, FileRecord], update: Mapping[str, FileRecord | None]
) -> dict[str, FileRecord]:
    """The ``files`` reducer: set each path to its new record, or delete it on ``None``.

    A subagent's :class:`~deepactors.filediff.FileDiff` reaches it already
    resolved into such a mapping (see :func:`~deepactors.filediff.merge`).
    """
    for path, record in update.items():
        if record is None:
            current.pop(path, None)
        else:
            current[path] = record
    return current


def coerce_files(value: object) -> dict[str, FileRecord]:
    """User input for ``files``: absolute paths to text, records or deepagents' FileData.

    Raises:
        InputError: A path that is not absolute or climbs out, or a value that is no file.
    """
    if not isinstance(value, Mapping):
        raise InputError("'files' must map paths to file contents")
    files: dict[str, FileRecord] = {}
    for path, item in value.items():
        if not isinstance(path, str) or not path.startswith("/"):
            raise InputError(f"file paths must be absolute strings like '/notes.md', not {path!r}")
        if ".." in path.split("/") or "\x00" in path or "\\" in path:
            raise InputError(f"file path {path!r} must not contain '..', '\\' or NUL")
        if isinstance(item, FileRecord):
            files[path] = item
        elif isinstance(item, str):
            files[path] = FileRecord(content=item)
        elif isinstance(item, Mapping) and _is_file_data(item):
            try:
                files[path] = FileRecord.from_file_data(item)
            except ValueError as exc:
                raise InputError(f"invalid file {path!r}: {exc}") from exc
        else:
            try:
                files[path] = FileRecord.model_validate(item)
            except ValidationError as exc:
                raise InputError(f"invalid file {path!r}: {exc.errors()[0]['msg']}") from exc
    return files


def _is_file_data(item: Mapping[str, object]) -> bool:
    """deepagents' FileData: an encoding, ISO timestamps, or content as a list of lines."""
    return (
        "encoding" in item
        or isinstance(item.get("content"), list)
        or isinstance(item.get("created_at"), str)
        or isinstance(item.get("modified_at"), str)
    )


def check_files(state: Mapping[str, Any], value: object) -> FileDiff | dict[str, FileRecord | None]:
    """A tool's ``files`` update: text (or deepagents' ``FileData`` dict) becomes the
    next version of the file in ``state``.

    Raises:
        ValueError: A value that is neither text, FileData, a record, ``None`` nor a diff.
    """
    if isinstance(value, FileDiff):
        return value
    if not isinstance(value, Mapping):
        raise ValueError("'files' must map paths to text, a FileRecord or None")
    out: dict[str, FileRecord | None] = {}
    for path, item in value.items():
        if item is None or isinstance(item, FileRecord):
            out[path] = item
        elif isinstance(item, str):
            out[path] = FileRecord.written(state["files"].get(path), item)
        elif isinstance(item, Mapping) and "content" in item:
            # deepagents' FileData (create_file_data(...)): its text, as the next
            # version of the file, like text would be.
            try:
                content = FileRecord.from_file_data(item).content
            except ValueError as exc:
                raise ValueError(f"file {path!r}: {exc}") from None
            out[path] = FileRecord.written(state["files"].get(path), content)
        else:
            raise ValueError(
                f"file {path!r} must be set to text, a FileData dict "
                "(create_file_data(...)), a FileRecord or None"
            )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Appended:
    """A stored append, read back: the file's next version is its current one plus
    ``text`` (see ``FileRecord.appended``); resolved against the state it lands on."""

    text: str
    at: int
    version: int
    modified_at: float

    def on(self, path: str, current: FileRecord | None) -> FileRecord:
        if (
            current is None
            or current.version != self.version - 1
            or len(current.content) != self.at
        ):
            found = "no file" if current is None else f"version {current.version}"
            raise ValueError(
                f"text appended to {path} at version {self.version - 1}, "
                f"offset {self.at}, but the state has {found} there"
            )
        return current.appended(self.text, modified_at=self.modified_at)


def resolve_files(
    current: dict[str, FileRecord], value: FileDiff | Mapping[str, object]
) -> tuple[Mapping[str, object], MergeResult | None]:
    """An update as the plain per-path records it comes to, plus a diff's merge outcome."""
    if isinstance(value, FileDiff):
        result = merge(current, value)
        return _settle_appends(current, result.changes), result
    return _settle_appends(current, value), None


def _settle_appends(
    current: dict[str, FileRecord], update: Mapping[str, object]
) -> Mapping[str, object]:
    """The update with every append tied to the state it lands on.

    A stored append (read back from a checkpoint) becomes its record. A record
    that says it grew from an older version, but lands on another one (a child
    that appended twice, merged over the version it started from), becomes a
    plain record, so its checkpoint stores it whole instead of an append that
    would not replay. The update itself comes back when nothing changed.
    """
    settled: dict[str, object] | None = None
    for path, value in update.items():
        if isinstance(value, _Appended):
            value = value.on(path, current.get(path))
        elif isinstance(value, FileRecord) and value.appended_at is not None:
            if _grows(current.get(path), value):
                continue
            value = FileRecord(
                content=value.content,
                version=value.version,
                created_at=value.created_at,
                modified_at=value.modified_at,
            )
        else:
            continue
        if settled is None:
            settled = dict(update)
        settled[path] = value
    return update if settled is None else settled


def _grows(base: FileRecord | None, record: FileRecord) -> bool:
    """Whether ``record`` is ``base`` with text added at its end (the stored append's claim)."""
    return (
        base is not None
        and base.version == record.version - 1
        and len(base.content) == record.appended_at
        and record.content.startswith(base.content)
    )


_DIFF_KEY = "__diff__"  # never a path: paths start with "/"


def encode_files(value: FileDiff | Mapping[str, FileRecord | None]) -> JSONObject:
    """An update as JSON data: a diff whole, an append as its added text only."""
    if isinstance(value, FileDiff):
        # An unapplied diff (a tool result waiting for its step's end).
        return {
            _DIFF_KEY: {
                "label": value.label,
                "changes": {
                    p: {"base": _record(c.base), "new": _record(c.new)}
                    for p, c in value.changes.items()
                },
            }
        }
    return {p: _record_or_append(r) for p, r in value.items()}


_APPENDED_KEY = "appended"  # never a FileRecord field


def _record_or_append(record: FileRecord | None) -> JSONObject | None:
    at = None if record is None else record.appended_at
    if record is None or at is None:
        return _record(record)
    return {
        _APPENDED_KEY: record.content[at:],
        "at": at,
        "version": record.version,
        "modified_at": record.modified_at,
    }


def _read_record_or_append(data: object) -> FileRecord | _Appended | None:
    if isinstance(data, Mapping) and _APPENDED_KEY in data:
        text, at, version, modified = (
            data[k] for k in (_APPENDED_KEY, "at", "version", "modified_at")
        )
        if not isinstance(text, str) or not all(
            isinstance(n, int | float) and not isinstance(n, bool) for n in (at, version, modified)
        ):
            raise ValueError("an appended file record needs text, at, version and modified_at")
        return _Appended(text=text, at=int(at), version=int(version), modified_at=float(modified))
    return _read_record(data)


def decode_files(data: object) -> FileDiff | dict[str, FileRecord | _Appended | None]:
    """The inverse of :func:`encode_files` (an append comes back unresolved)."""
    raw = data.get(_DIFF_KEY) if isinstance(data, Mapping) else None
    if raw is not None:
        return FileDiff(
            changes={
                p: FileChange(base=_read_record(c["base"]), new=_read_record(c["new"]))
                for p, c in raw["changes"].items()
            },
            label=raw["label"],
        )
    if not isinstance(data, Mapping):
        raise TypeError("stored files must be an object of paths")
    return {p: _read_record_or_append(r) for p, r in data.items()}


def _record(record: FileRecord | None) -> JSONObject | None:
    return None if record is None else record.model_dump(mode="json")


def _read_record(data: object) -> FileRecord | None:
    return None if data is None else FileRecord.model_validate(data)

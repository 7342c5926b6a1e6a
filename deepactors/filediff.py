"""File diffs of subagents, and how the parent's ``files`` reducer merges them.

A subagent starts from a copy-on-write snapshot of its parent's files. When it
finishes, :func:`diff_files` records, per path it created, changed or deleted,
the record it started from (``base``) and the record it ended with (``new``).
The parent's ``files`` channel folds a :class:`FileDiff` with :func:`merge`, which
computes the effect (a plain per-path update) and an outcome per path, without
changing its inputs:

* the parent's file is still the one the child started from: the child's change
  applies (a delete included);
* someone else (a sibling merged first, or the parent itself) changed it meanwhile:
  a three-way line merge of base, current and the child's version, when their
  edits touch different lines;
* otherwise the current file stays, and the child's version is saved beside it as
  ``<stem>.conflict-<task>.<ext>`` (``/notes.md`` from ``task-3`` becomes
  ``/notes.conflict-task-3.md``), and the child's tool result says so.

No write is ever dropped without a word: every outcome is in :meth:`MergeResult.report`.
Children of one model turn are merged in the order of their tool calls, not the
order they finish, so the result does not depend on timing.
"""

from __future__ import annotations

import base64
import difflib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, final

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = [
    "FileChange",
    "FileDiff",
    "FileRecord",
    "MergeOutcome",
    "MergeResult",
    "conflict_path",
    "diff_files",
    "merge",
    "merge_diff",
    "three_way_merge",
]


class FileRecord(BaseModel):
    """A file kept in agent state.

    Attributes:
        content: The whole text, line endings as written.
        version: 1 when created, +1 on every change. Subagent diffs are checked
            against it to tell whether a sibling changed the file meanwhile.
        created_at: Creation time, seconds since the epoch.
        modified_at: Time of the last change, seconds since the epoch.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str
    version: int = 1
    created_at: float = Field(default_factory=time.time)
    modified_at: float = Field(default_factory=time.time)
    # Set when this version is the previous one with text added at its end: the
    # previous content's length. A checkpoint then stores only the added text, so
    # a file grown by appends (a conversation transcript) costs O(its size) in
    # all, not O(size) per append. Not a field: it says how the version was made,
    # not what it is, so it takes no part in equality or dumps.
    _appended_at: int | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileRecord):
            return NotImplemented
        return (self.content, self.version, self.created_at, self.modified_at) == (
            other.content,
            other.version,
            other.created_at,
            other.modified_at,
        )

    def __hash__(self) -> int:
        return hash((self.content, self.version, self.created_at, self.modified_at))

    @property
    def appended_at(self) -> int | None:
        """The previous version's length when this one only added text at its end."""
        return self._appended_at

    def appended(self, text: str, *, modified_at: float | None = None) -> FileRecord:
        """The next version of this file with ``text`` added at its end."""
        record = FileRecord(
            content=self.content + text,
            version=self.version + 1,
            created_at=self.created_at,
            modified_at=time.time() if modified_at is None else modified_at,
        )
        record._appended_at = len(self.content)
        return record

    def changed(self, content: str) -> FileRecord:
        """The next version of this file with new content."""
        return FileRecord(
            content=content,
            version=self.version + 1,
            created_at=self.created_at,
            modified_at=time.time(),
        )

    @staticmethod
    def written(current: FileRecord | None, content: str) -> FileRecord:
        """The record after writing ``content`` over ``current`` (None: a new file)."""
        return FileRecord(content=content) if current is None else current.changed(content)

    # deepagents' FileData view: ``record["content"]``, ISO timestamps, an encoding.

    def __getitem__(self, key: str) -> str:
        """Read the record as deepagents' ``FileData`` dict (``record["content"]``)."""
        match key:
            case "content":
                return self.content
            case "encoding":
                return "utf-8"
            case "created_at":
                return _iso(self.created_at)
            case "modified_at":
                return _iso(self.modified_at)
            case _:
                raise KeyError(key)

    def keys(self) -> tuple[str, ...]:
        """The keys of the ``FileData`` view."""
        return _FILE_DATA_KEYS

    def to_file_data(self) -> dict[str, str]:
        """deepagents' ``FileData`` dict of this record."""
        return {k: self[k] for k in _FILE_DATA_KEYS}

    @classmethod
    def from_file_data(cls, data: Mapping[str, Any]) -> FileRecord:
        """A record from deepagents' ``FileData`` (content a string or, legacy, lines).

        Raises:
            ValueError: Not a FileData dict, or content that is not text.
        """
        content = data.get("content")
        if isinstance(content, list):
            content = "\n".join(str(line) for line in content)
        if not isinstance(content, str):
            raise ValueError("'content' must be text")
        if data.get("encoding", "utf-8") == "base64":
            try:
                content = base64.b64decode(content, validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError("base64 content that is not UTF-8 text") from exc
        now = time.time()
        return cls(
            content=content,
            created_at=_epoch(data.get("created_at"), now),
            modified_at=_epoch(data.get("modified_at"), now),
        )


_FILE_DATA_KEYS = ("content", "encoding", "created_at", "modified_at")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _epoch(value: object, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f"a timestamp must be ISO 8601 text or seconds, not {value!r}")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One path's change in a child.

    Attributes:
        base: The record the child started from (None: the path did not exist).
        new: The record the child ended with (None: the child deleted it).
    """

    base: FileRecord | None
    new: FileRecord | None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class MergeOutcome:
    """What happened to one path of a diff when it was merged.

    Attributes:
        path: The path.
        how: ``applied``, ``merged`` (three-way), ``unchanged`` (the parent already
            had the same content), ``conflict`` (the child's version is at
            ``saved_as``), ``kept`` (the child deleted a file someone else changed
            meanwhile: the file stays).
        saved_as: Where the child's version went on a conflict.
    """

    path: str
    how: Literal["applied", "merged", "unchanged", "conflict", "kept"]
    saved_as: str | None = None


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FileDiff:
    """A child's file changes, as the parent's ``files`` reducer receives them.

    Attributes:
        changes: Per path, what the child started from and ended with.
        label: Names the child in conflict file names (``task-3``).
    """

    changes: Mapping[str, FileChange]
    label: str

    def __bool__(self) -> bool:
        return bool(self.changes)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class MergeResult:
    """What merging a :class:`FileDiff` did.

    Attributes:
        label: The child the diff came from.
        changes: The effect on the parent's files: per path its new record, or
            None where the path was deleted (a plain ``files`` update).
        outcomes: One per path of the diff, in path order.
    """

    label: str
    changes: Mapping[str, FileRecord | None]
    outcomes: tuple[MergeOutcome, ...]

    @property
    def conflicts(self) -> list[MergeOutcome]:
        """The outcomes that need the model's attention."""
        return [o for o in self.outcomes if o.how in ("conflict", "kept")]

    def report(self) -> str:
        """A note for the child's tool result: what merged, and every conflict."""
        if not self.outcomes:
            return ""
        lines = []
        applied = [o.path for o in self.outcomes if o.how in ("applied", "merged", "unchanged")]
        if applied:
            lines.append(f"Files changed by the subagent: {', '.join(applied)}.")
        for o in self.outcomes:
            if o.how == "merged":
                lines.append(f"{o.path} was also changed by another agent; the edits were merged.")
            elif o.how == "conflict":
                lines.append(
                    f"CONFLICT: {o.path} was changed by another agent on the same lines; it was "
                    f"kept as is and the subagent's version was saved as {o.saved_as}. "
                    "Reconcile them."
                )
            elif o.how == "kept":
                lines.append(
                    f"CONFLICT: the subagent deleted {o.path}, but another agent changed it "
                    "meanwhile, so it was kept."
                )
        return "\n".join(lines)


def diff_files(
    base: Mapping[str, FileRecord], current: Mapping[str, FileRecord]
) -> dict[str, FileChange]:
    """What changed from ``base`` to ``current`` (records are immutable: identity suffices)."""
    changes: dict[str, FileChange] = {}
    for path, record in current.items():
        old = base.get(path)
        if old is not record:
            changes[path] = FileChange(base=old, new=record)
    for path, old in base.items():
        if path not in current:
            changes[path] = FileChange(base=old, new=None)
    return changes


def conflict_path(path: str, label: str) -> str:
    """Where a conflicting version from ``label`` is saved: ``/a/b.conflict-task-3.md``."""
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.partition(".") if not name.startswith(".") else (name, "", "")
    suffix = f".conflict-{label}"
    return f"{folder}/{stem}{suffix}{dot}{ext}"


def _same(a: FileRecord | None, b: FileRecord | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or (a.version == b.version and a.content == b.content)


def merge(files: Mapping[str, FileRecord], diff: FileDiff) -> MergeResult:
    """What folding a child's diff into the parent's ``files`` does; changes neither."""
    changes: dict[str, FileRecord | None] = {}
    outcomes: list[MergeOutcome] = []

    def now_at(path: str) -> FileRecord | None:
        # Earlier paths of this diff may have written here (a conflict copy).
        return changes[path] if path in changes else files.get(path)

    def put(path: str, new: FileRecord | None, now: FileRecord | None) -> None:
        if new is not None and now is not None and new.version <= now.version:
            # Keep versions increasing along the parent's history of this path.
            new = now.changed(new.content)
        changes[path] = new

    for path in sorted(diff.changes):
        change = diff.changes[path]
        now = now_at(path)
        new = change.new
        if _same(now, change.base):
            put(path, new, now)
            outcomes.append(MergeOutcome(path=path, how="applied"))
        elif new is None:
            # Deleted by the child, changed by someone else: keep the newer content.
            outcomes.append(MergeOutcome(path=path, how="unchanged" if now is None else "kept"))
        elif now is None:
            # Someone deleted what the child changed: the child's work wins the path.
            put(path, new, None)
            outcomes.append(MergeOutcome(path=path, how="applied"))
        elif now.content == new.content:
            outcomes.append(MergeOutcome(path=path, how="unchanged"))
        else:
            base_text = change.base.content if change.base is not None else ""
            merged = three_way_merge(base_text, now.content, new.content)
            if merged is not None:
                changes[path] = now.changed(merged)
                outcomes.append(MergeOutcome(path=path, how="merged"))
            else:
                saved = conflict_path(path, diff.label)
                put(saved, new, now_at(saved))
                outcomes.append(MergeOutcome(path=path, how="conflict", saved_as=saved))
    return MergeResult(label=diff.label, changes=changes, outcomes=tuple(outcomes))


def merge_diff(files: dict[str, FileRecord], diff: FileDiff) -> MergeResult:
    """Merge a child's diff into ``files`` in place; return what it did."""
    result = merge(files, diff)
    for path, record in result.changes.items():
        if record is None:
            files.pop(path, None)
        else:
            files[path] = record
    return result


_Hunk = tuple[int, int, tuple[str, ...]]  # base[start:end] is replaced by lines


def _hunks(base: Sequence[str], other: Sequence[str]) -> list[_Hunk]:
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [
        (i1, i2, tuple(other[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _clash(a: _Hunk, b: _Hunk) -> bool:
    a1, a2, _ = a
    b1, b2, _ = b
    if a1 == b1:  # same start: both insert here, or both replace from here
        return True
    # Overlapping ranges; a pure insertion clashes with a range strictly containing it.
    return max(a1, b1) < min(a2, b2) or (a1 == a2 and b1 < a1 < b2) or (b1 == b2 and a1 < b1 < a2)


def three_way_merge(base: str, ours: str, theirs: str) -> str | None:
    """Merge two edits of ``base`` line by line; None when they touch the same lines.

    Line endings are kept exactly as each side wrote them. The result does not
    depend on which side is ``ours`` (the hunks are applied in base order).
    """
    if ours == theirs:
        return ours
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    b = base.splitlines(keepends=True)
    hunks_a = _hunks(b, ours.splitlines(keepends=True))
    hunks_b = _hunks(b, theirs.splitlines(keepends=True))
    merged: list[_Hunk] = []
    for ha in hunks_a:
        for hb in hunks_b:
            if _clash(ha, hb) and ha != hb:
                return None
    seen = set()
    for h in sorted(hunks_a + hunks_b, key=lambda h: (h[0], h[1], h[2])):
        if h not in seen:
            seen.add(h)
            merged.append(h)
    out: list[str] = []
    pos = 0
    for start, end, lines in merged:
        out.extend(b[pos:start])
        out.extend(lines)
        pos = end
    out.extend(b[pos:])
    return "".join(out)

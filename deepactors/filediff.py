"""File diffs of subagents, and how the parent's ``files`` reducer merges them.

A subagent starts from a copy-on-write snapshot of its parent's files. When it
finishes, :func:`diff_files` records, per path it created, changed or deleted,
the record it started from (``base``) and the record it ended with (``new``).
The parent's ``files`` channel folds a :class:`FileDiff` with :func:`merge_diff`:

* the parent's file is still the one the child started from: the child's change
  applies (a delete included);
* someone else (a sibling merged first, or the parent itself) changed it meanwhile:
  a three-way line merge of base, current and the child's version, when their
  edits touch different lines;
* otherwise the current file stays, and the child's version is saved beside it as
  ``<stem>.conflict-<task>.<ext>`` (``/notes.md`` from ``task-3`` becomes
  ``/notes.conflict-task-3.md``), and the child's tool result says so.

No write is ever dropped without a word: every outcome is in :attr:`FileDiff.report`.
Children of one model turn are merged in the order of their tool calls, not the
order they finish, so the result does not depend on timing.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .state import FileRecord

__all__ = [
    "FileChange",
    "FileDiff",
    "MergeOutcome",
    "conflict_path",
    "diff_files",
    "merge_diff",
    "three_way_merge",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One path's change in a child.

    Attributes:
        base: The record the child started from (None: the path did not exist).
        new: The record the child ended with (None: the child deleted it).
    """

    base: FileRecord | None
    new: FileRecord | None


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
    how: str
    saved_as: str | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class FileDiff:
    """A child's file changes, as the parent's ``files`` reducer receives them.

    Attributes:
        changes: Per path, what the child started from and ended with.
        label: Names the child in conflict file names (``task-3``).
        outcomes: Filled in by the merge, one per path.
    """

    changes: Mapping[str, FileChange]
    label: str
    outcomes: list[MergeOutcome] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changes)

    def merge_into(self, files: dict[str, FileRecord]) -> dict[str, FileRecord]:
        """Merge into ``files`` (what the ``files`` reducer calls for a diff)."""
        return merge_diff(files, self)

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


def merge_diff(current: dict[str, FileRecord], diff: FileDiff) -> dict[str, FileRecord]:
    """Fold a child's diff into the parent's files (the ``files`` reducer for diffs)."""
    for path in sorted(diff.changes):
        change = diff.changes[path]
        now = current.get(path)
        new = change.new
        if _same(now, change.base):
            _set(current, path, new, now)
            diff.outcomes.append(MergeOutcome(path=path, how="applied"))
        elif new is None:
            # Deleted by the child, changed by someone else: keep the newer content.
            if now is None:
                diff.outcomes.append(MergeOutcome(path=path, how="unchanged"))
            else:
                diff.outcomes.append(MergeOutcome(path=path, how="kept"))
        elif now is None:
            # Someone deleted what the child changed: the child's work wins the path.
            _set(current, path, new, None)
            diff.outcomes.append(MergeOutcome(path=path, how="applied"))
        elif now.content == new.content:
            diff.outcomes.append(MergeOutcome(path=path, how="unchanged"))
        else:
            base_text = change.base.content if change.base is not None else ""
            merged = three_way_merge(base_text, now.content, new.content)
            if merged is not None:
                current[path] = now.changed(merged)
                diff.outcomes.append(MergeOutcome(path=path, how="merged"))
            else:
                saved = conflict_path(path, diff.label)
                _set(current, saved, new, current.get(saved))
                diff.outcomes.append(MergeOutcome(path=path, how="conflict", saved_as=saved))
    return current


def _set(
    files: dict[str, FileRecord], path: str, new: FileRecord | None, now: FileRecord | None
) -> None:
    if new is None:
        files.pop(path, None)
        return
    if now is not None and new.version <= now.version:
        # Keep versions increasing along the parent's history of this path.
        new = now.changed(new.content)
    files[path] = new


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

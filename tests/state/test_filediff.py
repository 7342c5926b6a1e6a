"""Property tests for the files reducer's diff merge: commutation and no lost content."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from deepactors.filediff import (
    FileDiff,
    conflict_path,
    diff_files,
    merge_diff,
    three_way_merge,
)
from deepactors.state import FileRecord

LINES = st.sampled_from(["alpha\n", "beta\n", "gamma\n", "delta\n", "eps\r\n", "zeta"])
TEXT = st.lists(LINES, max_size=8).map("".join)
PATHS = st.sampled_from([f"/d/f{i}.md" for i in range(6)])


@st.composite
def base_and_edits(draw: st.DrawFn) -> tuple[dict[str, FileRecord], list[dict[str, FileRecord]]]:
    """Parent files and 2-4 children's end states, each started from those files."""
    base = {p: FileRecord(content=draw(TEXT)) for p in draw(st.sets(PATHS, max_size=5))}
    children = []
    for _ in range(draw(st.integers(2, 4))):
        files = dict(base)
        for path in draw(st.sets(PATHS, max_size=4)):
            if path in files and draw(st.booleans()) and draw(st.booleans()):
                del files[path]
            else:
                old = files.get(path)
                content = draw(TEXT)
                files[path] = old.changed(content) if old else FileRecord(content=content)
        children.append(files)
    return base, children


def merged(
    base: dict[str, FileRecord], children: list[dict[str, FileRecord]], order: list[int]
) -> dict[str, str]:
    files = dict(base)
    for i in order:
        diff = FileDiff(changes=diff_files(base, children[i]), label=f"task-{i + 1}")
        merge_diff(files, diff)
    return {p: r.content for p, r in files.items()}


@settings(max_examples=300, deadline=None)
@given(base_and_edits())
def test_children_touching_disjoint_paths_commute(case: tuple) -> None:  # type: ignore[type-arg]
    base, children = case
    # Keep each path's change in one child only: disjoint diffs.
    owner: dict[str, int] = {}
    for i, files in enumerate(children):
        for path in diff_files(base, files):
            owner.setdefault(path, i)
    disjoint = []
    for i, files in enumerate(children):
        kept = dict(base)
        for path, change in diff_files(base, files).items():
            if owner[path] == i:
                if change.new is None:
                    kept.pop(path, None)
                else:
                    kept[path] = change.new
        disjoint.append(kept)
    results = {
        tuple(sorted(merged(base, disjoint, list(order)).items()))
        for order in itertools.permutations(range(len(disjoint)))
    }
    assert len(results) == 1


@settings(max_examples=300, deadline=None)
@given(base_and_edits())
def test_no_written_content_is_ever_dropped(case: tuple) -> None:  # type: ignore[type-arg]
    base, children = case
    final = merged(base, children, list(range(len(children))))
    everything = "".join(final.values())
    for files in children:
        for path, change in diff_files(base, files).items():
            if change.new is None:
                continue
            old_lines = set((change.base.content if change.base else "").splitlines(True))
            for line in change.new.content.splitlines(True):
                if line not in old_lines:
                    # A line the child wrote survives, in its file or a conflict copy
                    # (a last line without newline may gain one in a merge).
                    assert line.rstrip("\r\n") in everything, (path, line, final)


@settings(max_examples=500, deadline=None)
@given(TEXT, TEXT, TEXT)
def test_three_way_merge_is_symmetric_and_keeps_both_sides(base: str, a: str, b: str) -> None:
    ab = three_way_merge(base, a, b)
    ba = three_way_merge(base, b, a)
    assert ab == ba
    if ab is not None:
        # Every line either side added is in the merge.
        for side in (a, b):
            added = set(side.splitlines(True)) - set(base.splitlines(True))
            assert all(line.rstrip("\r\n") in ab for line in added)
    assert three_way_merge(base, a, base) == a
    assert three_way_merge(base, base, b) == b


def test_non_overlapping_line_edits_merge_and_keep_crlf() -> None:
    base = "one\r\ntwo\r\nthree\r\nfour\r\n"
    a = "ONE\r\ntwo\r\nthree\r\nfour\r\n"
    b = "one\r\ntwo\r\nthree\r\nFOUR\r\n"
    assert three_way_merge(base, a, b) == "ONE\r\ntwo\r\nthree\r\nFOUR\r\n"
    assert three_way_merge(base, a, "one\r\nTWO?\r\nthree\r\nfour\r\n") is not None
    assert three_way_merge(base, a, "uno\r\ntwo\r\nthree\r\nfour\r\n") is None


def test_conflict_copies_have_a_documented_name() -> None:
    assert conflict_path("/notes.md", "task-3") == "/notes.conflict-task-3.md"
    assert conflict_path("/a/b/report", "task-1") == "/a/b/report.conflict-task-1"
    assert conflict_path("/.env", "task-2") == "/.env.conflict-task-2"
    assert conflict_path("/x.tar.gz", "task-4") == "/x.conflict-task-4.tar.gz"


def test_a_deletion_loses_to_a_concurrent_change() -> None:
    old = FileRecord(content="v1\n")
    files = {"/f": old.changed("v2 by sibling\n")}
    diff = FileDiff(changes=diff_files({"/f": old}, {}), label="task-1")
    result = merge_diff(files, diff)
    assert files["/f"].content == "v2 by sibling\n"
    assert result.conflicts[0].how == "kept"
    assert "deleted /f" in result.report()

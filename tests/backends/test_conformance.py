"""One conformance suite, run over every backend (see ``conftest.KINDS``)."""

from __future__ import annotations

import anyio
import pytest

from deepactors.backends import ABSENT, Backend, FileInfo
from deepactors.errors import (
    EditError,
    FileNotFound,
    InvalidPath,
    InvalidPattern,
    IsADirectory,
    NotADirectory,
    ReadBeforeWrite,
    UnsupportedOperation,
)

from .conftest import Harness

FIVE = "one\ntwo\nthree\nfour\nfive\n"


async def write_tree(backend: Backend, files: dict[str, str]) -> None:
    for path, content in files.items():
        await backend.write(path, content)


# -- paths -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("notes.md", "/notes.md"),
        ("/a//b/./c.txt", "/a/b/c.txt"),
        ("./a/b.txt/", "/a/b.txt"),
        ("/x~y/~z", "/x~y/~z"),
    ],
)
async def test_paths_are_normalised(backend: Backend, given: str, canonical: str) -> None:
    result = await backend.write(given, "hi\n")
    assert result.path == canonical
    window = await backend.read(canonical)
    assert window.path == canonical
    assert window.lines == ("hi",)


@pytest.mark.parametrize(
    "bad",
    [
        "../etc/passwd",
        "/a/../../b",
        "/a/..",
        "~/x",
        "~root/x",
        "a\0b",
        "C:\\x",
        "c:/x",
        "\\\\srv\\x",
    ],
)
async def test_malformed_paths_are_refused(backend: Backend, bad: str) -> None:
    with pytest.raises(InvalidPath) as info:
        await backend.write(bad, "x")
    assert info.value.path == bad
    with pytest.raises(InvalidPath):
        await backend.read(bad)
    with pytest.raises(InvalidPath):
        await backend.ls(bad)


# -- read windows ----------------------------------------------------------


async def test_read_first_page(backend: Backend) -> None:
    await backend.write("/f.txt", FIVE)
    w = await backend.read("/f.txt", limit=2)
    assert (w.lines, w.start_line, w.end_line, w.total_lines, w.next_offset) == (
        ("one", "two"),
        1,
        2,
        5,
        2,
    )


async def test_read_middle_page(backend: Backend) -> None:
    await backend.write("/f.txt", FIVE)
    w = await backend.read("/f.txt", offset=2, limit=2)
    assert (w.lines, w.start_line, w.end_line, w.next_offset) == (("three", "four"), 3, 4, 4)
    last = await backend.read("/f.txt", offset=4, limit=2)
    assert (last.lines, last.end_line, last.next_offset) == (("five",), 5, None)


async def test_read_past_the_end_is_empty(backend: Backend) -> None:
    await backend.write("/f.txt", FIVE)
    w = await backend.read("/f.txt", offset=10, limit=3)
    assert (w.lines, w.start_line, w.end_line, w.total_lines, w.next_offset) == (
        (),
        11,
        10,
        5,
        None,
    )


async def test_read_limit_zero_reads_nothing(backend: Backend) -> None:
    await backend.write("/f.txt", FIVE)
    w = await backend.read("/f.txt", offset=1, limit=0)
    assert (w.lines, w.start_line, w.end_line, w.next_offset) == ((), 2, 1, 1)


async def test_read_whole_file_and_empty_file(backend: Backend) -> None:
    await backend.write("/f.txt", "a\r\nb\n\nc")
    w = await backend.read("/f.txt")
    assert w.lines == ("a", "b", "", "c")
    assert w.text == "a\nb\n\nc"
    await backend.write("/empty.txt", "")
    e = await backend.read("/empty.txt")
    assert (e.lines, e.total_lines, e.next_offset) == ((), 0, None)


async def test_read_rejects_negative_window(backend: Backend) -> None:
    await backend.write("/f.txt", FIVE)
    with pytest.raises(ValueError, match="offset"):
        await backend.read("/f.txt", offset=-1)
    with pytest.raises(ValueError, match="limit"):
        await backend.read("/f.txt", limit=-1)


async def test_read_missing_and_folder(backend: Backend) -> None:
    with pytest.raises(FileNotFound) as info:
        await backend.read("/nope.txt")
    assert info.value.path == "/nope.txt"
    await backend.write("/dir/f.txt", "x")
    with pytest.raises(IsADirectory):
        await backend.read("/dir")


# -- write, versions, stat -------------------------------------------------


async def test_write_creates_and_replaces_with_new_versions(harness: Harness) -> None:
    backend = harness.backend
    first = await backend.write("/a/b/c.txt", "v1")
    assert first.created
    window = await backend.read("/a/b/c.txt")
    assert window.version == first.version
    second = await backend.write("/a/b/c.txt", "v2 longer")
    assert not second.created
    assert second.version != first.version
    assert (await backend.read("/a/b/c.txt")).version == second.version
    assert await harness.raw("/a/b/c.txt") == "v2 longer"
    info = await backend.stat("/a/b/c.txt")
    assert (info.path, info.is_dir, info.size, info.version) == (
        "/a/b/c.txt",
        False,
        9,
        second.version,
    )
    folder = await backend.stat("/a/b")
    assert folder.is_dir
    assert folder.version is None


@pytest.mark.parametrize("path", ["/v.txt", "/memories/v.txt"])
async def test_expected_version_is_checked_with_the_change(harness: Harness, path: str) -> None:
    backend = harness.backend
    first = await backend.write(path, "one\n", expected_version=ABSENT)
    with pytest.raises(ReadBeforeWrite, match="created by someone else"):
        await backend.write(path, "again\n", expected_version=ABSENT)
    second = await backend.write(path, "two\n", expected_version=first.version)
    with pytest.raises(ReadBeforeWrite, match="changed since you last read it"):
        await backend.write(path, "stale\n", expected_version=first.version)
    with pytest.raises(ReadBeforeWrite):
        await backend.edit(path, "two", "2", expected_version=first.version)
    edited = await backend.edit(path, "two", "2", expected_version=second.version)
    assert await harness.raw(path) == "2\n"
    await backend.delete(path)
    with pytest.raises(ReadBeforeWrite, match="no longer exists"):
        await backend.write(path, "x\n", expected_version=edited.version)
    assert await harness.raw(path) is None


@pytest.mark.parametrize("expected", ["read", ABSENT])
async def test_two_writers_expecting_the_same_version_cannot_both_succeed(
    harness: Harness, expected: str
) -> None:
    backend = harness.backend
    version = ABSENT
    if expected == "read":
        version = (await backend.write("/shared.md", "v0\n")).version
    outcomes: list[str] = []

    async def write(text: str) -> None:
        try:
            await backend.write("/shared.md", text, expected_version=version)
            outcomes.append(text)
        except ReadBeforeWrite:
            outcomes.append("refused")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write, "parent\n")
            tg.start_soon(write, "child\n")
    assert sorted(outcomes)[-1] == "refused"
    winner = next(o for o in outcomes if o != "refused")
    assert await harness.raw("/shared.md") == winner


async def test_a_file_deleted_and_created_again_has_a_new_version(harness: Harness) -> None:
    backend = harness.backend
    for path in ("/x.md", "/memories/x.md"):
        old = await backend.write(path, "same\n")
        await backend.delete(path)
        new = await backend.write(path, "same\n")
        assert new.version != old.version
        with pytest.raises(ReadBeforeWrite):
            await backend.write(path, "stale\n", expected_version=old.version)


async def test_write_over_folder_or_under_file_is_refused(backend: Backend) -> None:
    await backend.write("/dir/f.txt", "x")
    with pytest.raises(IsADirectory):
        await backend.write("/dir", "x")
    with pytest.raises(NotADirectory):
        await backend.write("/dir/f.txt/g.txt", "x")
    with pytest.raises(IsADirectory):
        await backend.write("/", "x")


async def test_stat_missing(backend: Backend) -> None:
    with pytest.raises(FileNotFound):
        await backend.stat("/missing")


# -- edit ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "old", "new", "expected"),
    [
        ("a\nb\nc\n", "b", "B", "a\nB\nc\n"),
        ("a\nb\nc", "c", "C", "a\nb\nC"),
        ("one\r\ntwo\r\nthree\r\n", "one\ntwo", "uno\ndos", "uno\r\ndos\r\nthree\r\n"),
        ("one\r\ntwo\r\nthree", "two\nthree", "2\n3\n4", "one\r\n2\r\n3\r\n4"),
        ("x\r\ny\r\n", "x\r\ny", "X\r\nY", "X\r\nY\r\n"),
        ("lf\nfile\n", "lf\r\nfile", "LF\r\nFILE", "LF\nFILE\n"),
        ("mixed\r\nlf\nend\r\n", "lf\nend", "LF\nEND", "mixed\r\nLF\nEND\r\n"),
        ("a\r\nb\r\n", "a", "a\nx", "a\r\nx\r\nb\r\n"),
        ("a\r\nb\r\nc\r\n", "\nb", "", "a\r\nc\r\n"),
        ("x\ny\r\nz\n", "\nz", "\nZ", "x\ny\r\nZ\n"),
    ],
    ids=[
        "middle",
        "no-final-newline",
        "crlf",
        "crlf-no-final",
        "crlf-given",
        "lf-file",
        "mixed",
        "crlf-new-gets-crlf",
        "crlf-lf-is-never-half-of-crlf",
        "lf-file-odd-crlf-line",
    ],
)
async def test_edit_preserves_line_endings_and_final_newline(
    harness: Harness, content: str, old: str, new: str, expected: str
) -> None:
    await harness.backend.write("/f.txt", content)
    result = await harness.backend.edit("/f.txt", old, new)
    assert result.replacements == 1
    assert await harness.raw("/f.txt") == expected


async def test_edit_not_found_not_unique_and_replace_all(harness: Harness) -> None:
    backend = harness.backend
    written = await backend.write("/f.txt", "x = 1\nx = 1\ny = 2\n")
    with pytest.raises(EditError, match="not found") as info:
        await backend.edit("/f.txt", "z = 3", "z = 4")
    assert info.value.path == "/f.txt"
    with pytest.raises(EditError, match="2 times"):
        await backend.edit("/f.txt", "x = 1", "x = 9")
    with pytest.raises(EditError):
        await backend.edit("/f.txt", "", "x")
    assert await harness.raw("/f.txt") == "x = 1\nx = 1\ny = 2\n"
    result = await backend.edit("/f.txt", "x = 1", "x = 9", replace_all=True)
    assert result.replacements == 2
    assert result.version != written.version
    assert await harness.raw("/f.txt") == "x = 9\nx = 9\ny = 2\n"
    with pytest.raises(FileNotFound):
        await backend.edit("/missing.txt", "a", "b")


async def test_concurrent_edits_lose_nothing(harness: Harness) -> None:
    backend = harness.backend
    await backend.write("/f.txt", "".join(f"line {i}\n" for i in range(20)))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(backend.edit, "/f.txt", f"line {i}\n", f"LINE {i}\n")
    assert await harness.raw("/f.txt") == "".join(f"LINE {i}\n" for i in range(20))


# -- ls and delete ---------------------------------------------------------


async def test_ls_lists_direct_children(backend: Backend) -> None:
    await write_tree(backend, {"/a.txt": "a", "/dir/b.txt": "bb", "/dir/sub/c.txt": "c"})
    entries = await backend.ls("/dir")
    assert [(e.path, e.is_dir) for e in entries] == [("/dir/b.txt", False), ("/dir/sub", True)]
    assert entries[0].size == 2
    root = {e.path: e.is_dir for e in await backend.ls("/")}
    assert root["/a.txt"] is False
    assert root["/dir"] is True
    with pytest.raises(NotADirectory):
        await backend.ls("/a.txt")
    with pytest.raises(FileNotFound):
        await backend.ls("/nothing")


async def test_delete_is_recursive(harness: Harness) -> None:
    backend = harness.backend
    await write_tree(backend, {"/keep.txt": "k", "/dir/a.txt": "a", "/dir/sub/b.txt": "b"})
    await backend.delete("/dir")
    with pytest.raises(FileNotFound):
        await backend.ls("/dir")
    assert await harness.raw("/dir/sub/b.txt") is None
    assert [e.path for e in await backend.ls("/") if not e.path.startswith("/memories")] == [
        "/keep.txt"
    ]
    await backend.delete("/keep.txt")
    assert await harness.raw("/keep.txt") is None
    with pytest.raises(FileNotFound):
        await backend.delete("/keep.txt")
    with pytest.raises(InvalidPath):
        await backend.delete("/")


# -- glob ------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["[z-a]", "**/[z-a].md", "memories/[z-a]/*", "/[z-a]*"])
async def test_a_glob_with_a_reversed_class_is_an_invalid_path(
    backend: Backend, pattern: str
) -> None:
    await backend.write("/memories/m.md", "x\n")
    with pytest.raises(InvalidPath, match="character class"):
        await backend.glob(pattern)
    with pytest.raises(InvalidPath, match="character class"):
        await backend.grep("x", glob=pattern)


TREE = {
    "/a.py": "def a():\n    return 1\n",
    "/notes.md": "# Notes\nTODO: write more\n",
    "/src/b.py": "import os\n\ndef b(x):\n    return x  # TODO\n",
    "/src/deep/c.py": "def c():\n    pass\n",
    "/src/.e.py": "def hidden():\n    pass\n",
    "/.env": "SECRET=1\n",
    "/.hidden/d.py": "def d():\n    pass\n",
    "/src/data.txt": "TODO one\r\nTODO two\r\n",
}


def paths(infos: list[FileInfo]) -> list[str]:
    return [i.path for i in infos]


@pytest.mark.parametrize(
    ("pattern", "folder", "expected"),
    [
        ("*.py", "/", ["/a.py"]),
        ("**/*.py", "/", ["/a.py", "/src/b.py", "/src/deep/c.py"]),
        ("**", "/src", ["/src/b.py", "/src/data.txt", "/src/deep/c.py"]),
        ("*.py", "/src", ["/src/b.py"]),
        ("src/*/*.py", "/", ["/src/deep/c.py"]),
        ("/src/*.py", "/", ["/src/b.py"]),
        ("/src/**/c.py", "/src", ["/src/deep/c.py"]),
        (".*", "/", ["/.env"]),
        ("**/.e.py", "/", ["/src/.e.py"]),
        (".hidden/*.py", "/", ["/.hidden/d.py"]),
        ("src/[bc].py", "/", ["/src/b.py"]),
        ("src/[!b]*.py", "/", []),
        ("?.py", "/", ["/a.py"]),
        ("*.rs", "/", []),
        ("*", "/nowhere", []),
    ],
)
async def test_glob(backend: Backend, pattern: str, folder: str, expected: list[str]) -> None:
    await write_tree(backend, TREE)
    found = await backend.glob(pattern, folder)
    assert paths(found) == expected
    assert all(not f.is_dir and f.version for f in found)


async def test_glob_refuses_dotdot(backend: Backend) -> None:
    with pytest.raises(InvalidPath):
        await backend.glob("../*.py")


# -- grep ------------------------------------------------------------------


async def test_grep_regex_line_numbers_and_order(backend: Backend) -> None:
    await write_tree(backend, TREE)
    result = await backend.grep(r"^def \w+\(")
    assert [(m.path, m.line_number, m.line) for m in result.matches] == [
        ("/.hidden/d.py", 1, "def d():"),
        ("/a.py", 1, "def a():"),
        ("/src/.e.py", 1, "def hidden():"),
        ("/src/b.py", 3, "def b(x):"),
        ("/src/deep/c.py", 1, "def c():"),
    ]
    assert not result.truncated


async def test_grep_glob_filter_and_path(backend: Backend) -> None:
    await write_tree(backend, TREE)
    by_name = await backend.grep("TODO", glob="*.py")
    assert [(m.path, m.line_number) for m in by_name.matches] == [("/src/b.py", 4)]
    in_src = await backend.grep("TODO", path="/src")
    assert [(m.path, m.line_number, m.line) for m in in_src.matches] == [
        ("/src/b.py", 4, "    return x  # TODO"),
        ("/src/data.txt", 1, "TODO one"),
        ("/src/data.txt", 2, "TODO two"),
    ]
    relative = await backend.grep("TODO", path="/src", glob="*/*.py")
    assert relative.matches == ()
    one_file = await backend.grep("TODO", path="/notes.md")
    assert [(m.path, m.line_number) for m in one_file.matches] == [("/notes.md", 2)]
    end_anchor = await backend.grep(r"two$", path="/src")
    assert [m.line for m in end_anchor.matches] == ["TODO two"]


async def test_grep_truncates_at_max_matches(backend: Backend) -> None:
    await write_tree(backend, TREE)
    result = await backend.grep("TODO", max_matches=2)
    assert result.truncated
    assert [(m.path, m.line_number) for m in result.matches] == [
        ("/notes.md", 2),
        ("/src/b.py", 4),
    ]
    exact = await backend.grep("TODO", max_matches=4)
    assert len(exact.matches) == 4
    assert not exact.truncated


async def test_grep_errors(backend: Backend) -> None:
    await write_tree(backend, TREE)
    with pytest.raises(InvalidPattern):
        await backend.grep("(unclosed")
    # What a linear-time engine cannot do is refused, naming the feature.
    with pytest.raises(InvalidPattern, match="lookahead"):
        await backend.grep(r"TODO(?= one)")
    with pytest.raises(InvalidPattern, match="backreferences"):
        await backend.grep(r"(\w+) \1")
    with pytest.raises(FileNotFound):
        await backend.grep("x", path="/nowhere")


async def test_execute_only_where_supported(harness: Harness) -> None:
    backend = harness.backend
    if backend.can_execute:
        result = await backend.execute("echo hi")
        assert (result.output, result.exit_code) == ("hi\n", 0)
    else:
        with pytest.raises(UnsupportedOperation):
            await backend.execute("echo hi")


async def test_patterns_that_are_not_strings_are_refused_clearly(backend: Backend) -> None:
    await write_tree(backend, TREE)
    with pytest.raises(InvalidPath, match="must be a string, not int"):
        await backend.glob(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidPattern, match="must be a string, not list"):
        await backend.grep(["TODO"])  # type: ignore[arg-type]
    with pytest.raises(InvalidPath, match="must be a string, not dict"):
        await backend.grep("TODO", glob={})  # type: ignore[arg-type]

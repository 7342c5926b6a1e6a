"""``Backend.append``, over every backend of the conformance suite (see ``conftest.KINDS``)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from deepactors.backends import FilesystemBackend
from deepactors.errors import InvalidPath, IsADirectory, NotADirectory, PathOutsideRoot

from .conftest import Harness

pytestmark = pytest.mark.anyio


async def test_append_creates_the_file_and_its_folders(harness: Harness) -> None:
    backend = harness.backend
    result = await backend.append("/logs/today/run.md", "first\n")
    assert result.path == "/logs/today/run.md"
    assert result.created
    assert await harness.raw("/logs/today/run.md") == "first\n"
    assert [i.path for i in await backend.ls("/logs")] == ["/logs/today"]


async def test_appends_add_at_the_end_and_change_the_version(harness: Harness) -> None:
    backend = harness.backend
    await backend.write("/log.md", "a\n")
    before = (await backend.read("/log.md")).version
    second = await backend.append("/log.md", "b\n")
    third = await backend.append("/log.md", "c")
    assert not second.created
    assert not third.created
    assert await harness.raw("/log.md") == "a\nb\nc"
    window = await backend.read("/log.md")
    assert window.lines == ("a", "b", "c")
    assert window.version == third.version
    assert len({before, second.version, third.version}) == 3
    # An empty append is a no-op on the text, and still a valid call.
    await backend.append("/log.md", "")
    assert await harness.raw("/log.md") == "a\nb\nc"


async def test_append_is_refused_on_a_folder_or_under_a_file(harness: Harness) -> None:
    backend = harness.backend
    await backend.write("/dir/inner.txt", "x")
    with pytest.raises(IsADirectory):
        await backend.append("/dir", "y")
    with pytest.raises(NotADirectory):
        await backend.append("/dir/inner.txt/below.md", "y")
    with pytest.raises(InvalidPath):
        await backend.append("../escape.md", "y")
    assert await harness.raw("/dir/inner.txt") == "x"


async def test_concurrent_appends_and_edits_lose_nothing(harness: Harness) -> None:
    backend = harness.backend
    await backend.write("/shared.md", "HEAD\n")
    pieces = [f"piece {i:02d}\n" for i in range(20)]

    async def edit_head() -> None:
        await backend.edit("/shared.md", "HEAD", "TOP")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for piece in pieces:
                tg.start_soon(backend.append, "/shared.md", piece)
            tg.start_soon(edit_head)
    text = await harness.raw("/shared.md")
    assert text is not None
    assert text.startswith("TOP\n")
    lines = text.splitlines()[1:]
    assert sorted(lines) == [p.strip() for p in pieces]


async def test_disk_append_writes_in_place_and_keeps_the_inode(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path)
    await backend.append("/h.md", "one\n")
    inode = await anyio.Path(tmp_path / "h.md").stat()
    await backend.append("/h.md", "two\n")
    after = await anyio.Path(tmp_path / "h.md").stat()
    assert after.st_ino == inode.st_ino  # the file grew; it was not rewritten and replaced
    assert await anyio.Path(tmp_path / "h.md").read_text() == "one\ntwo\n"


async def test_disk_append_never_follows_a_symlink_out_of_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    await anyio.Path(root).mkdir()
    await anyio.Path(outside).mkdir()
    await anyio.Path(outside / "secret.md").write_text("keep\n")
    await anyio.to_thread.run_sync(os.symlink, outside / "secret.md", root / "link.md")
    backend = FilesystemBackend(root)
    with pytest.raises(PathOutsideRoot):
        await backend.append("/link.md", "injected\n")
    assert await anyio.Path(outside / "secret.md").read_text() == "keep\n"

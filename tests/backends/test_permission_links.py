"""File permissions through links (issue 34, item 4): rules judged where a path leads.

A disk root holds ``/secrets`` (denied), ``/docs`` (writes ask a human) and
``/public`` with symlinks into both and a hard link to the secret. Every check
here got through before rules were judged on the resolved path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import pytest

from deepactors import (
    AssistantMessage,
    Command,
    CompositeBackend,
    FilesystemBackend,
    FilesystemPermission,
    LocalShellBackend,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    create_deep_agent,
)
from deepactors.backends import PermissionedBackend, PermissionRules
from deepactors.errors import ConfigurationError, PermissionDenied
from deepactors.persistence import MemoryCheckpointer

if TYPE_CHECKING:
    from deepactors.backends._links import Resolved

pytestmark = pytest.mark.anyio

SECRET = "the secret\n"
DENY = [FilesystemPermission(operations=["read", "write"], paths=["/secrets/**"], mode="deny")]
ASK = [FilesystemPermission(operations=["write"], paths=["/docs/**"], mode="interrupt")]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """``/secrets/key.txt``, ``/docs/a.md``, and links to them under ``/public``."""
    root = tmp_path / "root"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "key.txt").write_text(SECRET)
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("docs\n")
    (root / "public").mkdir()
    (root / "public" / "note.md").write_text("public note\n")
    os.symlink("../secrets", root / "public" / "link")
    os.symlink("../secrets/key.txt", root / "public" / "key-link.txt")
    os.symlink("../docs", root / "public" / "docs")
    return root


@pytest.fixture
def guarded(root: Path) -> PermissionedBackend:
    return PermissionedBackend(FilesystemBackend(root, use_ripgrep=False), PermissionRules(DENY))


async def test_read_through_a_symlink_to_a_denied_folder_or_file_is_refused(
    guarded: PermissionedBackend,
) -> None:
    for path in ("/public/link/key.txt", "/public/key-link.txt"):
        with pytest.raises(PermissionDenied, match=r"/secrets/key\.txt"):
            await guarded.read(path)
    with pytest.raises(PermissionDenied):
        await guarded.stat("/public/link/key.txt")
    # A link to an allowed place still works, under the name it was asked by.
    window = await guarded.read("/public/docs/a.md")
    assert window.path == "/public/docs/a.md"
    assert window.lines == ("docs",) or "docs" in "".join(window.lines)


async def test_ls_glob_grep_never_list_or_search_a_denied_file_through_a_link(
    guarded: PermissionedBackend,
) -> None:
    with pytest.raises(PermissionDenied):
        await guarded.ls("/public/link")
    with pytest.raises(PermissionDenied):
        await guarded.glob("*", "/public/link")
    with pytest.raises(PermissionDenied):
        await guarded.grep("secret", path="/public/link")
    with pytest.raises(PermissionDenied):
        await guarded.grep("secret", path="/public/key-link.txt")
    listed = [e.path for e in await guarded.ls("/public")]
    assert listed == ["/public/docs", "/public/note.md"]
    found = [f.path for f in await guarded.glob("**/*")]
    assert not [p for p in found if "key" in p or "secrets" in p], found
    assert (await guarded.grep("secret")).matches == ()


async def test_write_through_a_link_into_a_denied_folder_creates_nothing(
    guarded: PermissionedBackend, root: Path
) -> None:
    with pytest.raises(PermissionDenied):
        await guarded.write("/public/link/new.txt", "planted")
    with pytest.raises(PermissionDenied):
        await guarded.write("/public/key-link.txt", "overwritten")
    with pytest.raises(PermissionDenied):
        await guarded.append("/public/key-link.txt", "more")
    with pytest.raises(PermissionDenied):
        await guarded.edit("/public/link/key.txt", "secret", "gone")
    assert sorted(p.name for p in (root / "secrets").iterdir()) == ["key.txt"]
    assert (root / "secrets" / "key.txt").read_text() == SECRET
    # Deleting the link removes the link, never what it points at.
    await guarded.delete("/public/key-link.txt")
    assert not (root / "public" / "key-link.txt").is_symlink()
    assert (root / "secrets" / "key.txt").read_text() == SECRET


async def test_a_dangling_link_into_a_denied_folder_creates_nothing(
    guarded: PermissionedBackend, root: Path
) -> None:
    os.symlink("../secrets/new", root / "public" / "later")
    with pytest.raises(PermissionDenied, match=r"/secrets/new/x\.txt"):
        await guarded.write("/public/later/x.txt", "planted")
    assert not (root / "secrets" / "new").exists()


class SwapAfterCheck(FilesystemBackend):
    """A disk where ``/public/dir`` becomes a link to ``/secrets`` right after it is checked."""

    async def resolve_links(self, paths: Sequence[str]) -> list[Resolved]:
        found = await super().resolve_links(paths)
        await anyio.to_thread.run_sync(self._swap)
        return found

    def _swap(self) -> None:
        folder = Path(self.root) / "public" / "dir"
        if folder.is_dir() and not folder.is_symlink():
            (folder / "key.txt").unlink()
            folder.rmdir()
            os.symlink("../secrets", folder)


async def test_a_link_swapped_in_after_the_check_is_refused_not_followed(root: Path) -> None:
    (root / "public" / "dir").mkdir()
    (root / "public" / "dir" / "key.txt").write_text("harmless\n")
    guarded = PermissionedBackend(SwapAfterCheck(root), PermissionRules(DENY))
    with pytest.raises(PermissionDenied, match="symlink after its permission check"):
        await guarded.read("/public/dir/key.txt")
    # The same for a write: nothing lands in /secrets.
    (root / "public" / "dir").unlink()
    (root / "public" / "dir").mkdir()
    (root / "public" / "dir" / "key.txt").write_text("harmless\n")
    with pytest.raises(PermissionDenied):
        await guarded.write("/public/dir/key.txt", "planted")
    assert (root / "secrets" / "key.txt").read_text() == SECRET


async def test_a_hard_link_to_a_denied_file_is_neither_read_searched_nor_appended(
    guarded: PermissionedBackend, root: Path
) -> None:
    os.link(root / "secrets" / "key.txt", root / "public" / "hard.txt")
    with pytest.raises(PermissionDenied, match="hard links"):
        await guarded.read("/public/hard.txt")
    with pytest.raises(PermissionDenied, match="hard links"):
        await guarded.append("/public/hard.txt", "more")
    with pytest.raises(PermissionDenied, match="hard links"):
        await guarded.grep("secret", path="/public/hard.txt")
    assert (await guarded.grep("secret", path="/public")).matches == ()
    assert (root / "secrets" / "key.txt").read_text() == SECRET
    # Without any deny rule, hard links are ordinary files.
    plain = PermissionedBackend(FilesystemBackend(root), PermissionRules(ASK))
    assert "the secret" in "".join((await plain.read("/public/hard.txt")).lines)


async def test_a_write_through_a_link_is_refused_without_approval(root: Path) -> None:
    guarded = PermissionedBackend(FilesystemBackend(root), PermissionRules(ASK))
    with pytest.raises(PermissionDenied, match="a human must approve"):
        await guarded.write("/public/docs/b.md", "unasked")
    assert not (root / "docs" / "b.md").exists()


def turns(*calls: Sequence[tuple[str, dict[str, Any]]]) -> list[AssistantMessage | str]:
    return [
        AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in turn]) for turn in calls
    ] + ["done"]


async def test_a_write_through_a_link_to_docs_asks_a_human(root: Path) -> None:
    script = turns([("write_file", {"file_path": "/public/docs/b.md", "content": "hello"})])
    agent = create_deep_agent(
        ScriptedModel(script),
        backend=FilesystemBackend(root),
        permissions=ASK,
        checkpointer=MemoryCheckpointer(),
    )
    first = await agent.ainvoke({"messages": "go"}, thread_id="t")
    (request,) = first["__interrupt__"]
    assert "/docs/b.md" in request["description"]
    assert not (root / "docs" / "b.md").exists()
    done = await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="t")
    result = [m for m in done["messages"] if isinstance(m, ToolMessage)][-1]
    assert result.status == "success", result.text
    assert (root / "docs" / "b.md").read_text() == "hello"


def test_a_route_inside_a_shell_backends_root_is_refused(tmp_path: Path) -> None:
    shell = LocalShellBackend(tmp_path / "work")
    with pytest.raises(ConfigurationError, match="/secrets"):
        CompositeBackend(shell, {"/secrets/": FilesystemBackend(tmp_path / "work" / "secrets")})
    with pytest.raises(ConfigurationError, match="/data"):
        CompositeBackend(shell, {"/data/": FilesystemBackend(tmp_path / "work")})
    # A folder beside the shell's root is fine.
    CompositeBackend(shell, {"/secrets/": FilesystemBackend(tmp_path / "secrets")})

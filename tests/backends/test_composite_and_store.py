"""Composite routing, store namespaces, and the MemoryStore."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepactors.backends import (
    CompositeBackend,
    FilesystemBackend,
    LocalShellBackend,
    StateBackend,
    StoreBackend,
)
from deepactors.errors import FileNotFound, InvalidPath, UnsupportedOperation
from deepactors.persistence import MemoryStore
from deepactors.state import State, default_channels


def make() -> tuple[CompositeBackend, State, MemoryStore]:
    state = State(default_channels())
    store = MemoryStore()
    composite = CompositeBackend(
        StateBackend(),
        routes={
            "/memories/": StoreBackend(store, namespace=("mem",)),
            "/memories/deep/": StoreBackend(store, namespace=("deep",)),
        },
    ).bind(state)
    return composite, state, store


async def test_paths_route_by_longest_segment_prefix() -> None:
    composite, state, store = make()
    await composite.write("/memories/a.md", "mem a\n")
    await composite.write("/memories/deep/b.md", "deep b\n")
    await composite.write("/memories2/c.md", "not a mount\n")
    await composite.write("/notes.md", "state\n")
    assert sorted(state.files) == ["/memories2/c.md", "/notes.md"]
    assert [i.key for i in await store.list(("mem",))] == ["/a.md"]
    assert [i.key for i in await store.list(("deep",))] == ["/b.md"]
    window = await composite.read("/memories/deep/b.md")
    assert (window.path, window.lines) == ("/memories/deep/b.md", ("deep b",))
    edited = await composite.edit("/memories/a.md", "a", "A")
    assert edited.path == "/memories/a.md"


async def test_ls_shows_mounts_beside_default_entries() -> None:
    composite, _, _ = make()
    await composite.write("/notes.md", "x")
    root = await composite.ls("/")
    assert [(e.path, e.is_dir) for e in root] == [("/memories", True), ("/notes.md", False)]
    await composite.write("/memories/a.md", "x")
    inside = await composite.ls("/memories")
    assert [(e.path, e.is_dir) for e in inside] == [
        ("/memories/a.md", False),
        ("/memories/deep", True),
    ]
    assert (await composite.stat("/memories/deep")).is_dir
    with pytest.raises(FileNotFound):
        await composite.ls("/nothing")


async def test_glob_and_grep_fan_out_with_full_paths() -> None:
    composite, _, _ = make()
    await composite.write("/notes.md", "TODO root\n")
    await composite.write("/memories/a.md", "TODO mem\n")
    await composite.write("/memories/deep/b.md", "TODO deep\n")
    await composite.write("/memories/deep/c.txt", "TODO txt\n")
    every = await composite.glob("**/*.md")
    assert [e.path for e in every] == ["/memories/a.md", "/memories/deep/b.md", "/notes.md"]
    assert [e.path for e in await composite.glob("memories/*/*.md")] == ["/memories/deep/b.md"]
    assert [e.path for e in await composite.glob("/memories/deep/*")] == [
        "/memories/deep/b.md",
        "/memories/deep/c.txt",
    ]
    assert [e.path for e in await composite.glob("*.md", "/memories")] == ["/memories/a.md"]
    found = await composite.grep("TODO")
    assert [(m.path, m.line) for m in found.matches] == [
        ("/memories/a.md", "TODO mem"),
        ("/memories/deep/b.md", "TODO deep"),
        ("/memories/deep/c.txt", "TODO txt"),
        ("/notes.md", "TODO root"),
    ]
    md = await composite.grep("TODO", glob="memories/**/*.md")
    assert [m.path for m in md.matches] == ["/memories/a.md", "/memories/deep/b.md"]
    capped = await composite.grep("TODO", max_matches=2)
    assert capped.truncated
    assert len(capped.matches) == 2


async def test_mount_points_cannot_be_deleted_but_their_files_can() -> None:
    composite, _, store = make()
    await composite.write("/memories/a.md", "x")
    with pytest.raises(InvalidPath):
        await composite.delete("/memories")
    await composite.delete("/memories/a.md")
    assert await store.list(("mem",)) == []


async def test_execute_goes_to_the_default(tmp_path: Path) -> None:
    store = MemoryStore()
    with_shell = CompositeBackend(LocalShellBackend(tmp_path), {"/m/": StoreBackend(store)})
    assert with_shell.can_execute
    assert (await with_shell.execute("echo ok")).output == "ok\n"
    plain = CompositeBackend(FilesystemBackend(tmp_path), {"/m/": StoreBackend(store)})
    assert not plain.can_execute
    with pytest.raises(UnsupportedOperation):
        await plain.execute("echo no")


async def test_store_backend_never_sees_other_namespaces() -> None:
    store = MemoryStore()
    await store.put(("files",), "/mine.md", {"content": "mine", "version": 1})
    await store.put(("files", "child"), "/child.md", {"content": "child", "version": 1})
    await store.put(("filesystem",), "/other.md", {"content": "other", "version": 1})
    backend = StoreBackend(store, namespace=("files",))
    assert [e.path for e in await backend.ls("/")] == ["/mine.md"]
    assert [e.path for e in await backend.glob("**")] == ["/mine.md"]
    assert [m.path for m in (await backend.grep(".")).matches] == ["/mine.md"]
    with pytest.raises(FileNotFound):
        await backend.read("/child.md")
    await backend.delete("/mine.md")
    assert [i.key for i in await store.search(("files",))] == ["/child.md"]


async def test_store_namespace_from_agent_name() -> None:
    store = MemoryStore()
    state = State(default_channels())
    unbound = StoreBackend(store, namespace=lambda name: ("agents", name, "files"))
    with pytest.raises(UnsupportedOperation):
        await unbound.read("/x")
    researcher = unbound.bind(state, name="researcher")
    await researcher.write("/x.md", "x")
    assert researcher.namespace == ("agents", "researcher", "files")
    assert [i.key for i in await store.list(("agents", "researcher", "files"))] == ["/x.md"]
    with pytest.raises(FileNotFound):
        await unbound.bind(state, name="main").read("/x.md")


async def test_memory_store_copies_values_and_validates() -> None:
    store = MemoryStore()
    value = {"a": [1, 2]}
    await store.put(("ns",), "k", value)
    value["a"].append(3)
    item = await store.get(("ns",), "k")
    assert item is not None
    assert item.value == {"a": [1, 2]}
    item.value["a"].append(4)
    again = await store.get(("ns",), "k")
    assert again is not None
    assert again.value == {"a": [1, 2]}
    with pytest.raises(TypeError):
        await store.put(("ns",), "bad", {"x": object()})
    with pytest.raises(ValueError, match="namespace"):
        await store.put((), "k", {})
    await store.put(("ns",), "k2", {})
    await store.put(("ns", "sub"), "k", {})
    assert [i.key for i in await store.list(("ns",), prefix="k")] == ["k", "k2"]
    assert [(i.namespace, i.key) for i in await store.search(("ns",))] == [
        (("ns",), "k"),
        (("ns",), "k2"),
        (("ns", "sub"), "k"),
    ]
    await store.delete(("ns",), "k")
    assert await store.get(("ns",), "k") is None


async def test_unbound_state_backend_says_to_bind() -> None:
    with pytest.raises(UnsupportedOperation, match="bind"):
        await StateBackend().read("/x")

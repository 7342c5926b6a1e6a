"""Fixtures for the backend suite: one harness per backend, and a blocking-call detector.

Every test in this folder runs under the blocking-call detector of
``tests/conftest.py`` (blockbuster, widened to trio); the ``test_detector_*``
canaries prove it fires on both loops.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepactors.backends import (
    Backend,
    CompositeBackend,
    FilesystemBackend,
    LocalShellBackend,
    StateBackend,
    StoreBackend,
)
from deepactors.persistence import MemoryStore
from deepactors.state import State, default_channels


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""


@dataclass
class Harness:
    """A backend under test plus a way to see its raw stored text."""

    kind: str
    backend: Backend
    raw: Callable[[str], Awaitable[str | None]]
    """The exact stored content of a (full virtual) path, None when absent."""
    store: MemoryStore | None = None
    state: State | None = None


def _state_raw(state: State) -> Callable[[str], Awaitable[str | None]]:
    async def raw(path: str) -> str | None:
        record = state.files.get(path)
        return None if record is None else record.content

    return raw


def _store_raw(store: MemoryStore, ns: tuple[str, ...]) -> Callable[[str], Awaitable[str | None]]:
    async def raw(path: str) -> str | None:
        item = await store.get(ns, path)
        return None if item is None else str(item.value["content"])

    return raw


def _disk_raw(root: Path) -> Callable[[str], Awaitable[str | None]]:
    async def raw(path: str) -> str | None:
        file = root / path.lstrip("/")
        # Test-side I/O, off the loop like the library's.
        import anyio.to_thread

        def load() -> str | None:
            return file.read_bytes().decode() if file.is_file() else None

        return await anyio.to_thread.run_sync(load)

    return raw


def _composite_raw(
    default: Callable[[str], Awaitable[str | None]],
    mount: str,
    mounted: Callable[[str], Awaitable[str | None]],
) -> Callable[[str], Awaitable[str | None]]:
    async def raw(path: str) -> str | None:
        if path == mount or path.startswith(mount + "/"):
            return await mounted(path[len(mount) :] or "/")
        return await default(path)

    return raw


KINDS = [
    "state",
    "filesystem",
    "filesystem-python-grep",
    "store",
    "composite-state+store",
    "composite-store+state",
    "local-shell",
]


def make_harness(kind: str, tmp_path: Path) -> Harness:
    """Build the harness for one backend kind (see :data:`KINDS`)."""
    state = State(default_channels())
    store = MemoryStore()
    ns = ("files", "main")
    root = tmp_path / "root"
    os.makedirs(root, exist_ok=True)
    if kind == "state":
        return Harness(kind, StateBackend().bind(state), _state_raw(state), state=state)
    if kind == "filesystem":
        return Harness(kind, FilesystemBackend(root), _disk_raw(root))
    if kind == "filesystem-python-grep":
        return Harness(kind, FilesystemBackend(root, use_ripgrep=False), _disk_raw(root))
    if kind == "local-shell":
        return Harness(kind, LocalShellBackend(root, timeout=10), _disk_raw(root))
    if kind == "store":
        backend = StoreBackend(store, namespace=lambda name: ("files", name)).bind(state)
        return Harness(kind, backend, _store_raw(store, ns), store=store)
    if kind == "composite-state+store":
        composite = CompositeBackend(
            StateBackend(), routes={"/memories/": StoreBackend(store, namespace=ns)}
        ).bind(state)
        raw = _composite_raw(_state_raw(state), "/memories", _store_raw(store, ns))
        return Harness(kind, composite, raw, store=store, state=state)
    if kind == "composite-store+state":
        composite = CompositeBackend(
            StoreBackend(store, namespace=ns), routes={"/memories/": StateBackend()}
        ).bind(state)
        raw = _composite_raw(_store_raw(store, ns), "/memories", _state_raw(state))
        return Harness(kind, composite, raw, store=store, state=state)
    raise AssertionError(kind)


@pytest.fixture(params=KINDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    """Each backend kind in turn."""
    return make_harness(request.param, tmp_path)


@pytest.fixture
def backend(harness: Harness) -> Backend:
    """The backend of :func:`harness`."""
    return harness.backend


def pid_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a container's init may not reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"

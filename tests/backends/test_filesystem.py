"""Disk-specific behaviour: confinement to the root, limits, binary files, ripgrep parity."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from blockbuster import BlockingError

from deepactors.backends import FilesystemBackend
from deepactors.backends._grep import walk_files
from deepactors.errors import (
    BinaryFile,
    FileTooLarge,
    InvalidPath,
    PathOutsideRoot,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "escape").symlink_to(outside)  # a folder symlink leaving the root
    (root / "secret-link.txt").symlink_to(outside / "secret.txt")
    (root / "inner.txt").write_text("inner\n")
    (root / "ok-link.txt").symlink_to(root / "inner.txt")
    return root


async def test_detector_fires_on_blocking_call_in_library(tmp_path: Path) -> None:
    # Canary: walking the disk on the event loop from deepactors code must be caught,
    # on asyncio and on trio alike, or the clean runs of this suite prove nothing.
    with pytest.raises(BlockingError):
        list(walk_files(str(tmp_path)))


@pytest.mark.parametrize("path", ["/escape/secret.txt", "/secret-link.txt", "escape"])
async def test_symlink_escape_is_refused(root: Path, path: str) -> None:
    backend = FilesystemBackend(root)
    with pytest.raises(PathOutsideRoot, match="outside the backend's root") as info:
        await backend.read(path)
    assert info.value.path == "/" + path.lstrip("/")
    with pytest.raises(PathOutsideRoot):
        await backend.write(path + "/new.txt" if path == "escape" else path, "x")
    with pytest.raises(PathOutsideRoot):
        await backend.grep("secret", path=path)
    assert (root.parent / "outside" / "secret.txt").read_text() == "top secret\n"


async def test_escaping_symlinks_are_hidden_from_ls_glob_and_grep(root: Path) -> None:
    backend = FilesystemBackend(root)
    assert [e.path for e in await backend.ls("/")] == ["/inner.txt", "/ok-link.txt"]
    assert [e.path for e in await backend.glob("**/*")] == ["/inner.txt", "/ok-link.txt"]
    assert (await backend.grep("secret")).matches == ()
    # An in-root symlink works like its target.
    assert (await backend.read("/ok-link.txt")).lines == ("inner",)


async def test_dotdot_is_invalid_not_outside(root: Path) -> None:
    with pytest.raises(InvalidPath):
        await FilesystemBackend(root).read("/../outside/secret.txt")


async def test_delete_removes_a_symlink_not_its_target(root: Path) -> None:
    backend = FilesystemBackend(root)
    await backend.delete("/escape")
    await backend.delete("/ok-link.txt")
    assert not (root / "escape").exists()
    assert (root.parent / "outside" / "secret.txt").exists()
    assert (root / "inner.txt").exists()


async def test_oversize_read_and_write(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path, max_read_bytes=100, max_write_bytes=50)
    (tmp_path / "big.txt").write_text("x" * 101)
    with pytest.raises(FileTooLarge, match="read limit") as info:
        await backend.read("/big.txt")
    assert info.value.path == "/big.txt"
    with pytest.raises(FileTooLarge):
        await backend.write("/w.txt", "y" * 51)
    assert not (tmp_path / "w.txt").exists()
    await backend.write("/w.txt", "y" * 50)
    # grep skips what read would refuse
    assert [m.path for m in (await backend.grep("x|y")).matches] == ["/w.txt"]


@pytest.mark.parametrize("data", [b"abc\x00def\n", b"\xff\xfe caf\xe9\n"], ids=["nul", "latin1"])
async def test_binary_files_are_refused(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "bin").write_bytes(data)
    backend = FilesystemBackend(tmp_path)
    with pytest.raises(BinaryFile):
        await backend.read("/bin")
    with pytest.raises(BinaryFile):
        await backend.edit("/bin", "abc", "x")


async def test_write_is_atomic_keeps_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path / "new-root")
    await backend.write("/deep/er/f.sh", "echo 1\n")
    target = tmp_path / "new-root" / "deep" / "er" / "f.sh"
    target.chmod(0o755)
    await backend.edit("/deep/er/f.sh", "1", "2")
    assert target.read_text() == "echo 2\n"
    assert oct(target.stat().st_mode & 0o777) == "0o755"
    assert os.listdir(target.parent) == ["f.sh"]


def _tricky_tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a.txt").write_text("alpha\nneedle one\n")
    (root / "a").mkdir()
    (root / "a" / "z.txt").write_text("needle in a/\n")
    (root / "src" / "m.py").write_text("x = 'needle'\r\nneedle()\r\n")
    (root / "src" / "pkg" / "n.py").write_text("no\nneedle\nneedle needle\n")
    (root / ".git" / "config").write_text("needle = git\n")
    (root / ".gitignore").write_text("src/\n")  # must not hide anything
    (root / "bin.dat").write_bytes(b"needle\n" + b"\x00" * 10)
    (root / "late-bin.dat").write_bytes(b"needle\n" * 20000 + b"\x00")
    (root / "latin1.txt").write_bytes(b"caf\xe9 needle\n")
    (root / "big.txt").write_text("needle\n" * 200)


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
@pytest.mark.parametrize(
    ("pattern", "kwargs"),
    [
        ("needle", {}),
        ("needle", {"glob": "*.py"}),
        ("needle", {"glob": "src/**/*.py"}),
        ("needle", {"path": "/src"}),
        ("needle", {"path": "/src/m.py"}),
        (r"^needle\(\)$", {}),
        (r"(\w+) \1", {}),
        ("needle", {"max_matches": 3}),
        ("caf.", {}),
    ],
)
async def test_ripgrep_and_python_grep_agree(
    tmp_path: Path, pattern: str, kwargs: dict[str, object]
) -> None:
    _tricky_tree(tmp_path)
    with_rg = FilesystemBackend(tmp_path, max_read_bytes=1000, use_ripgrep=True)
    without = FilesystemBackend(tmp_path, max_read_bytes=1000, use_ripgrep=False)
    fast = await with_rg.grep(pattern, **kwargs)  # type: ignore[arg-type]
    slow = await without.grep(pattern, **kwargs)  # type: ignore[arg-type]
    assert fast == slow
    assert fast.matches or pattern == r"(\w+) \1"
    assert all(not m.path.endswith(".dat") and m.path != "/big.txt" for m in fast.matches)

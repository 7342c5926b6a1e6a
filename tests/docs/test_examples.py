"""Every Python block of README.md and docs/ runs as printed, or says it is a fragment.

A complete block is executed as a script (``__name__ == "__main__"``) in a fresh
folder; a block that starts an event loop with ``anyio.run`` runs once on each
loop (``anyio.run`` is given the loop's name), the others once. A block that
fails is a failure: to show code that cannot run here (a key, a network, a
server, PostgreSQL), put ``<!-- fragment -->`` on the line before its fence.
The count of blocks run and of fragments is printed at the end of the session.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import pytest

from ._blocks import ROOT, Block, documents, python_blocks, stray_markers

BLOCKS = python_blocks()
COMPLETE = [b for b in BLOCKS if not b.fragment]
RUNS = [
    pytest.param(block, loop, id=f"{block.name}-{loop}")
    for block in COMPLETE
    for loop in (("asyncio", "trio") if block.is_async else ("no-loop",))
]


def _run_on(loop: str, real_run: Any) -> Any:
    @functools.wraps(real_run)
    def run(func: Any, *args: Any, backend: str = "asyncio", **kwargs: Any) -> Any:
        kwargs.pop("backend_options", None)
        return real_run(func, *args, backend=loop)

    return run


@pytest.mark.parametrize(("block", "loop"), RUNS)
def test_example_runs_as_printed(
    block: Block, loop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if loop != "no-loop":
        monkeypatch.setattr(anyio, "run", _run_on(loop, anyio.run))
    # Keys a block might find in the developer's environment must not make it
    # call a real provider: the complete blocks use deterministic models.
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code = compile(block.code, block.name, "exec")
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(tmp_path / "example.py")}
    exec(code, namespace)


def test_the_examples_are_found() -> None:
    assert len(documents()) > 20
    assert len(COMPLETE) >= 20, [b.name for b in COMPLETE]


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_fragment_markers_stand_before_python_blocks(path: Path) -> None:
    assert stray_markers(path) == []


def test_blocks_are_plain_python_not_console_sessions() -> None:
    sessions = [b.name for b in BLOCKS if b.code.lstrip().startswith(">>>")]
    assert sessions == []


def examples_summary() -> str:
    """The line the session prints at its end (see conftest.py)."""
    runs = sum(2 if b.is_async else 1 for b in COMPLETE)
    fragments = len(BLOCKS) - len(COMPLETE)
    return (
        f"docs examples: {len(COMPLETE)} complete Python blocks ({runs} runs: async ones on "
        f"asyncio and trio), {fragments} fragments, in {len(documents())} files"
    )

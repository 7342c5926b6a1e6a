"""A model's pattern cannot stall the process: catastrophic regexes and globs.

Each test runs a real agent whose model issues the calls, under a run timeout:
the calls must return, with the right answers, inside it (for these patterns a
backtracking engine would take minutes to centuries, on the loop or in a thread).
How long a 5 ms timer beside such a match is held up is a figure, measured in
``bench/w6_grep.py`` beside its floor, not asserted here.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from deepactors import AssistantMessage, ScriptedModel, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import (
    Backend,
    CompositeBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from deepactors.middleware._filesystem import FilesystemMiddleware
from deepactors.persistence import MemoryStore

pytestmark = pytest.mark.anyio

BACKENDS = ["state", "disk", "disk-ripgrep", "store", "composite"]
# A path under which every backend kind stores the file (in the composite, the
# mounted store).
FOLDER = {"composite": "/mnt"}


def make_backend(kind: str, tmp_path: Path) -> Backend:
    if kind == "state":
        return StateBackend()
    if kind == "disk":
        return FilesystemBackend(tmp_path, use_ripgrep=False)
    if kind == "disk-ripgrep":
        if shutil.which("rg") is None:
            pytest.skip("ripgrep is not installed")
        return FilesystemBackend(tmp_path, use_ripgrep=True)
    if kind == "store":
        return StoreBackend(MemoryStore())
    if kind == "composite":
        return CompositeBackend(StateBackend(), {"/mnt/": StoreBackend(MemoryStore())})
    raise AssertionError(kind)


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def run_calls(
    backend: Backend, turns: Sequence[Sequence[tuple[str, dict[str, Any]]]], *, timeout: float
) -> list[ToolMessage]:
    """Run the calls through an agent under ``timeout``; return the tool results."""
    answers: list[AssistantMessage | str] = [
        AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in turn]) for turn in turns
    ]
    agent = create_deep_agent(
        ScriptedModel([*answers, "done"]), middleware=[FilesystemMiddleware()], backend=backend
    )
    state = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, timeout=timeout)
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_a_catastrophic_regex_on_a_long_line_returns_at_once(
    backend_kind: str, tmp_path: Path
) -> None:
    folder = FOLDER.get(backend_kind, "")
    content = "a" * 50_000 + "!\n" + "aaa\n"
    results = await run_calls(
        make_backend(backend_kind, tmp_path),
        [
            [("write_file", {"file_path": f"{folder}/long.txt", "content": content})],
            [("grep", {"pattern": "(a+)+$", "path": folder or "/", "output_mode": "content"})],
        ],
        timeout=5,
    )
    assert results[0].status == "success", results[0].text
    # It matched the short line, not the long one, in linear time.
    assert results[1].text == f"{folder}/long.txt:2:aaa"


async def test_a_catastrophic_glob_returns_at_once(backend_kind: str, tmp_path: Path) -> None:
    folder = FOLDER.get(backend_kind, "")
    name = "a" * 200  # a long name (disks allow 255 bytes)
    results = await run_calls(
        make_backend(backend_kind, tmp_path),
        [
            [("write_file", {"file_path": f"{folder}/{name}", "content": "x\n"})],
            [
                # Backtracking would try every way to split 200 "a"s among 12 stars.
                ("glob", {"pattern": "*a" * 12 + "*b", "path": folder or "/"}),
                ("glob", {"pattern": "*a" * 12 + "*", "path": folder or "/"}),
                ("grep", {"pattern": "x", "glob": "*a" * 12 + "*b", "path": folder or "/"}),
            ],
        ],
        timeout=5,
    )
    assert results[1].text.startswith("No files match")
    assert results[2].text.startswith(f"{folder}/{name}")
    assert results[3].text.startswith("No matches")


async def test_patterns_a_linear_engine_cannot_run_are_refused_by_name(
    backend_kind: str, tmp_path: Path
) -> None:
    folder = FOLDER.get(backend_kind, "")
    refused = {
        r"(\w+) \1": "backreferences",
        r"foo(?=bar)": "lookahead",
        r"(?<!x)foo": "lookbehind",
        r"(?>a+)b": "atomic groups",
        r"a++": "possessive quantifiers",
        r"(?x) a b": "verbose mode",
        "\\w{1000}": "too large",
    }
    results = await run_calls(
        make_backend(backend_kind, tmp_path),
        [
            [("write_file", {"file_path": f"{folder}/f.txt", "content": "foobar\n"})],
            [("grep", {"pattern": p, "path": folder or "/"}) for p in refused],
        ],
        timeout=5,
    )
    for message, (pattern, feature) in zip(results[1:], refused.items(), strict=True):
        assert message.status == "error"
        assert message.text.startswith(f"invalid regular expression {pattern!r}")
        assert feature in message.text

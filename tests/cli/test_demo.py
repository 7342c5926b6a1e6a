"""The offline demo runs end to end, on both loops and from the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deepactors.assembly.demo import run_demo
from deepactors.events import Event, ToolCallStarted

pytestmark = pytest.mark.anyio


async def test_demo_fans_out_to_researchers_and_merges_their_notes() -> None:
    seen: list[Event] = []
    result = await run_demo(on_event=seen.append)
    searches = [
        e for e in seen if isinstance(e, ToolCallStarted) and e.call.name == "search_library"
    ]
    assert sorted(e.path for e in searches) == [
        "main/task-1:researcher",
        "main/task-2:researcher",
        "main/task-3:researcher",
    ]
    assert all(t.status == "completed" for t in result["todos"])
    files = result["files"]
    assert sorted(files) == [
        "/notes/actors.md",
        "/notes/cancellation.md",
        "/notes/structured-concurrency.md",
        "/report.md",
    ]
    report = files["/report.md"].content
    assert "Hewitt" in report
    assert "nurseries" in report
    assert "deadline" in report
    assert "task group" in result["messages"][-1].text


def test_demo_command_prints_the_live_view() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "deepactors", "demo", "--loop", "trio"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "[main/task-1:researcher] > tool search_library(topic='actors')" in out.stdout
    assert "plan 4/4 done" in out.stdout


async def test_the_demo_answers_the_question_it_is_given() -> None:
    result = await run_demo("What is cancellation?", on_event=lambda e: None)
    assert sorted(result["files"]) == ["/notes/cancellation.md", "/report.md"]
    assert "deadline" in result["files"]["/report.md"].content
    assert "Hewitt" not in result["files"]["/report.md"].content


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deepactors", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "", "ANTHROPIC_API_KEY": "not-used"},
    )


def test_the_command_has_a_version_and_explains_its_options() -> None:
    version = run_cli("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("deepactors ")
    helped = run_cli("demo", "--help")
    assert "event loop" in helped.stdout


def test_run_refuses_a_thread_it_cannot_keep() -> None:
    out = run_cli("run", "--thread", "t1", "hello")
    assert out.returncode == 2
    assert "--thread needs --db" in out.stderr

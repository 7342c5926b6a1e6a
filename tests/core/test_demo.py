"""The offline demo runs end to end, on both loops and from the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deepactors.demo import run_demo
from deepactors.events import Event, ToolCallStarted

pytestmark = pytest.mark.anyio


async def test_demo_plans_searches_in_parallel_and_answers() -> None:
    seen: list[Event] = []
    result = await run_demo(on_event=seen.append)
    searches = [
        e for e in seen if isinstance(e, ToolCallStarted) and e.call.name == "search_library"
    ]
    assert len(searches) == 3
    assert all(t.status == "completed" for t in result["todos"])
    assert "task group" in result["messages"][-1].text


def test_demo_command_prints_the_live_view() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "deepactors", "demo", "--loop", "trio"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "[main] > tool search_library(topic='actors')" in out.stdout
    assert "plan 4/4 done" in out.stdout

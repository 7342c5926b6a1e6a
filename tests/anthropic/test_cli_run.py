"""`deepactors run` on Claude, against the local Messages API server, as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.anthropic.fake_api import FakeAnthropicAPI, message, text, tool_use


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deepactors", "run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_run_streams_a_tool_using_answer_from_claude(api: FakeAnthropicAPI, loop: str) -> None:
    api.reply(
        message(
            text("Planning first."),
            tool_use("write_todos", {"todos": [{"content": "answer", "status": "completed"}]}),
        ),
        message(text("Forty-two.")),
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}
    out = run_cli("What", "is", "the", "answer?", "--loop", loop, env=env)
    assert out.returncode == 0, out.stderr
    assert "[main] > tool write_todos" in out.stdout
    assert "[main] answer: Forty-two." in out.stdout
    first, second = api.requests
    assert first.body["messages"][0]["content"][0]["text"] == "What is the answer?"
    assert second.body["messages"][-1]["content"][0]["type"] == "tool_result"


def test_run_without_a_key_points_to_the_demo() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    out = run_cli("hello", env=env)
    assert out.returncode == 2
    assert "ANTHROPIC_API_KEY" in out.stderr
    assert "deepactors demo" in out.stderr

"""`deepactors run --sandbox DIR`: the model's commands run in a bubblewrap workspace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.anthropic.fake_api import FakeAnthropicAPI, message, text, tool_use


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_run_with_a_sandbox_keeps_the_commands_in_its_workspace(
    sandbox_root: Path, loop: str
) -> None:
    with FakeAnthropicAPI() as api:
        api.reply(
            message(
                tool_use("execute", {"command": "echo made > out.txt; cat /etc/hostname; id -u"})
            ),
            message(text("Done.")),
        )
        env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "deepactors",
                "run",
                "make a file",
                "--loop",
                loop,
                "--sandbox",
                str(sandbox_root),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert "[main] answer: Done." in out.stdout
        result = api.requests[1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    # The file is in a workspace under the folder, not in the process's own.
    (made,) = sandbox_root.rglob("out.txt")
    assert made.read_text() == "made\n"
    assert not Path("out.txt").exists()


def test_run_with_a_sandbox_that_cannot_start_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "PATH": str(tmp_path)}  # no bwrap
    out = subprocess.run(
        [sys.executable, "-m", "deepactors", "run", "hi", "--sandbox", str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert out.returncode == 1
    assert "SandboxUnavailable" in out.stderr

"""``deepactors acp`` driven by the Agent Client Protocol's own client
(``@agentclientprotocol/sdk``, as an editor: ``js_protocols/acp_flows.mjs``),
on asyncio and on trio: a prompt turn streaming message chunks, reasoning as
thoughts, a file read through the editor's buffer (one that is not on disk) and
one written through it, ``execute`` in the editor's terminal, the plan from the
todos, permission granted and denied for an ``interrupt_on`` tool, cancel, and a
session loaded again, with its history, by another process on the same database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .acp_agent import write_acp_agent
from .test_agui import JS, protocol_node


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_acp_flows_with_the_acp_client(loop: str, tmp_path: Path) -> None:
    node = protocol_node()
    target = write_acp_agent(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [
            node,
            "acp_flows.mjs",
            sys.executable,
            target,
            str(tmp_path),
            loop,
            str(tmp_path / "s.db"),
        ],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    flows = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert len(flows) == 10, done.stdout
    assert not (tmp_path / "out.md").exists()

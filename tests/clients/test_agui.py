"""AG-UI's own client, ``@ag-ui/client``'s ``HttpAgent`` (Node), against ``deepactors
serve`` on asyncio (uvicorn) and trio (hypercorn), one server per loop
(``js_protocols/agui_flows.mjs``): text and a follow-up, todos and files as
state, reasoning, 50 subagents streaming with each one's events attributed to
its actor path (and hidden: all of them, or one type), an approval as an
interrupt resumed approved and cancelled, a failing run, and an abort that
cancels the run. The client's own verifier and schemas check every event; a
warning of the client fails the test.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .protocol_agent import write_agent
from .served import serving

JS = Path(__file__).parent / "js_protocols"


def protocol_node() -> str:
    """The ``node`` that runs the protocols' JS clients; skips, saying why, without them."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the protocol client tests need node and npm")
    if not (JS / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip(
            "the protocol clients are not installed: `npm ci --prefix tests/clients/js_protocols` "
            "(.ci/run does it when npm is there)"
        )
    return node


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def agent_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``deepactors serve`` serving the protocol test agent, on asyncio or trio."""
    folder = tmp_path_factory.mktemp(f"agui-{request.param}")
    with serving([write_agent(folder), "--loop", str(request.param)], folder) as url:
        yield url


def test_agui_flows_with_httpagent(agent_url: str) -> None:
    node = protocol_node()
    done = subprocess.run(
        [node, "agui_flows.mjs", agent_url], cwd=JS, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    flows = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert len(flows) == 12, done.stdout

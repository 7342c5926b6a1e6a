"""``deepactors serve`` as a real process: the demo agent offline, or module:agent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from deepactors.errors import ConfigurationError
from deepactors.server import load_agents

AGENT_MODULE = """
from deepactors import create_deep_agent
from deepactors.models import FunctionModel

agent = create_deep_agent(FunctionModel(lambda r: "served from a module"))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(args: list[str], cwd: Path) -> Iterator[str]:
    port = _free_port()
    log = cwd / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "deepactors", "serve", *args, "--port", str(port)],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:  # another process: poll until it answers
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/ok").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(20)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert code == 0, log.read_text()


@pytest.fixture(params=["asyncio", "trio"])
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_serve_without_arguments_serves_the_demo_offline(loop: str, tmp_path: Path) -> None:
    for url in _serve(["--loop", loop], tmp_path):
        with get_sync_client(url=url) as client:
            thread_id = client.threads.create()["thread_id"]
            result = client.runs.wait(
                thread_id, "agent", input={"messages": [{"role": "user", "content": "?"}]}
            )
            assert "/report.md" in result["files"]
            # The demo ends with a structured report (response_format).
            assert result["structured_response"]["report_path"] == "/report.md"


def test_serve_a_module_agent_with_a_database(loop: str, tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text(AGENT_MODULE)
    db = tmp_path / "threads.db"
    for url in _serve(["my_agent:agent", "--db", str(db), "--loop", loop], tmp_path):
        with get_sync_client(url=url) as client:
            result = client.runs.wait(
                "t1",
                "agent",
                input={"messages": [{"role": "user", "content": "hi"}]},
                if_not_exists="create",
            )
            assert result["messages"][-1]["content"] == "served from a module"
    for url in _serve(["my_agent:agent", "--db", str(db), "--loop", loop], tmp_path):
        with get_sync_client(url=url) as client:  # the thread survived the restart
            state = client.threads.get_state("t1")
            assert state["values"]["messages"][-1]["content"] == "served from a module"


def test_load_agents_says_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "not_agent.py").write_text("thing = 42\n")
    with pytest.raises(ConfigurationError, match="module:attribute"):
        load_agents("no_colon")
    with pytest.raises(ConfigurationError, match="cannot import"):
        load_agents("missing_module:agent")
    with pytest.raises(ConfigurationError, match="not a DeepAgent"):
        load_agents("not_agent:thing")

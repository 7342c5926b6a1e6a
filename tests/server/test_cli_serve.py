"""``deepactors serve`` as a real process: the demo agent offline, or module:agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from deepactors.errors import ConfigurationError
from deepactors.server import load_agents

from .serve_process import serving

AGENT_MODULE = """
from deepactors import create_deep_agent
from deepactors.models import FunctionModel

agent = create_deep_agent(FunctionModel(lambda r: "served from a module"))
"""


@pytest.fixture(params=["asyncio", "trio"])
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_serve_without_arguments_serves_the_demo_offline(loop: str, tmp_path: Path) -> None:
    with serving(["--loop", loop], tmp_path) as url, get_sync_client(url=url) as client:
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
    args = ["my_agent:agent", "--db", str(db), "--loop", loop]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        result = client.runs.wait(
            "t1",
            "agent",
            input={"messages": [{"role": "user", "content": "hi"}]},
            if_not_exists="create",
        )
        assert result["messages"][-1]["content"] == "served from a module"
    # The thread survives the restart.
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
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

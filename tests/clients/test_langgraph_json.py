"""``deepactors serve`` as a LangGraph user starts it: ``langgraph.json`` with no
argument, ``./file.py:attr``, and ``--db`` winning over a module's own
in-memory checkpointer (threads survive a restart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from deepactors.errors import ConfigurationError
from deepactors.server import load_agents

from .served import AGENT_MODULE, serving

MAILER = """
import os

from deepactors import create_deep_agent
from deepactors.models import FunctionModel
from helpers import greeting  # a neighbour module, imported as when run


agent = create_deep_agent(
    FunctionModel(lambda request: f"{greeting()} {os.environ['MAILER_NAME']}")
)
"""


def _say(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def _project(folder: Path) -> None:
    (folder / "src").mkdir()
    (folder / "src" / "mailer_app.py").write_text(MAILER)
    (folder / "src" / "helpers.py").write_text("def greeting():\n    return 'hello from'\n")
    (folder / ".env").write_text("# the graph's settings\nMAILER_NAME='the mailer'\n")
    config = {
        "dependencies": ["."],
        "graphs": {"mailer": "./src/mailer_app.py:agent"},
        "env": ".env",
        "python_version": "3.11",
    }
    (folder / "langgraph.json").write_text(json.dumps(config))


def test_serve_reads_langgraph_json_and_names_assistants_by_graph(
    loop: str, tmp_path: Path
) -> None:
    _project(tmp_path)
    with serving(["--loop", loop], tmp_path) as url, get_sync_client(url=url) as client:
        assistants = client.assistants.search()
        assert [a["graph_id"] for a in assistants] == ["mailer"]
        values = client.runs.wait(None, "mailer", input=_say("hi"))
        assert values["messages"][-1]["content"] == "hello from the mailer"
        unknown = client.http.client.post("/runs/wait", json={"assistant_id": "agent"})
        assert unknown.status_code == 404
        assert "mailer" in unknown.json()["detail"]


def test_serve_a_file_path_target(loop: str, tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "my_app.py").write_text(AGENT_MODULE)
    args = ["./app/my_app.py:agent", "--loop", loop]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        thread_id = client.threads.create()["thread_id"]
        values = client.runs.wait(thread_id, "agent", input=_say("hi"))
        assert values["messages"][-1]["content"] == "echo #1: hi"


def test_db_wins_over_a_modules_own_memory_checkpointer(loop: str, tmp_path: Path) -> None:
    # The module builds create_deep_agent(interrupt_on=..., checkpointer=MemoryCheckpointer()).
    (tmp_path / "client_app.py").write_text(AGENT_MODULE)
    args = ["client_app:agent", "--db", "threads.db", "--loop", loop]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        thread_id = client.threads.create()["thread_id"]
        client.runs.wait(thread_id, "agent", input=_say("email bob"))
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        state = client.threads.get_state(thread_id)
        assert state["next"] == ["tools"]  # still waiting for its approval
        values = client.runs.wait(
            thread_id, "agent", command={"resume": {"decisions": [{"type": "approve"}]}}
        )
        assert values["messages"][-1]["content"] == "sent: sent to bob: email bob"
    assert "checkpointer replaced by --db" in "".join(
        p.read_text() for p in tmp_path.glob("serve-*.log")
    )


def test_an_agent_with_interrupt_on_and_no_checkpointer_is_served_with_the_servers(
    loop: str, tmp_path: Path
) -> None:
    # create_deep_agent(interrupt_on=...) with no checkpointer builds; served,
    # it has the server's (--db's: the approval survives a restart).
    module = AGENT_MODULE.replace("    checkpointer=MemoryCheckpointer(),\n", "")
    assert "checkpointer=" not in module
    (tmp_path / "bare_app.py").write_text(module)
    args = ["bare_app:agent", "--db", "threads.db", "--loop", loop]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        thread_id = client.threads.create()["thread_id"]
        stopped = client.runs.wait(thread_id, "agent", input=_say("email bob"))
        assert stopped["__interrupt__"]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        assert client.threads.get_state(thread_id)["next"] == ["tools"]
        values = client.runs.wait(
            thread_id, "agent", command={"resume": {"decisions": [{"type": "approve"}]}}
        )
        assert values["messages"][-1]["content"] == "sent: sent to bob: email bob"
    logs = "".join(p.read_text() for p in tmp_path.glob("serve-*.log"))
    assert "checkpointer replaced" not in logs


def test_a_bad_langgraph_json_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    config = tmp_path / "langgraph.json"
    config.write_text("{not json")
    with pytest.raises(ConfigurationError, match=r"langgraph\.json: cannot read it as JSON"):
        load_agents(None)
    config.write_text(json.dumps({"graphs": {}}))
    with pytest.raises(ConfigurationError, match="must name at least one graph"):
        load_agents(None)
    (tmp_path / "thing.py").write_text("thing = 42\n")
    config.write_text(json.dumps({"graphs": {"g": "./thing.py:thing"}}))
    with pytest.raises(
        ConfigurationError, match=r"graph 'g' \(./thing.py:thing\) is not a DeepAgent"
    ):
        load_agents(None)
    with pytest.raises(ConfigurationError, match="no such file"):
        load_agents("./missing.py:agent")

"""``deepactors run --mcp FILE`` and ``deepactors mcp``: the command-line side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepactors import create_deep_agent
from deepactors.cli import build_parser, main
from deepactors.cli._mcp import read_mcp_servers
from deepactors.errors import ConfigurationError
from deepactors.models import FunctionModel


def test_run_takes_servers_from_a_claude_desktop_style_file(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "uvx", "args": ["t"]}}}))
    servers = read_mcp_servers(str(path))
    agent = create_deep_agent(FunctionModel(lambda r: "x"), mcp_servers=servers)
    assert any(mw.name == "MCPToolsMiddleware[time]" for mw in agent.spec.middleware)
    path.write_text("[1, 2]")
    with pytest.raises(ConfigurationError, match="JSON object"):
        read_mcp_servers(str(path))


def test_run_with_a_missing_mcp_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-used")
    code = main(["run", "--mcp", str(tmp_path / "none.json"), "question"])
    assert code == 2
    assert "--mcp" in capsys.readouterr().err


def test_the_mcp_command_serves_stdio_unless_told_http() -> None:
    args = build_parser().parse_args(["mcp", "pkg.mod:agent"])
    assert (args.agent, args.http, args.tool_name, args.loop) == (
        "pkg.mod:agent",
        False,
        "run",
        "asyncio",
    )
    args = build_parser().parse_args(["mcp", "--http", "--port", "9000", "--loop", "trio"])
    assert (args.http, args.port, args.host) == (True, 9000, "127.0.0.1")

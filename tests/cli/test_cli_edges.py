"""The ``deepactors`` command's rough edges (issue 42 item 7), as real processes.

No arguments prints the help; ``run --model openai:...`` without a key is refused
before anything starts; ``serve`` and ``run --agent`` name an agent as
``module:attribute`` and say clearly what is wrong with one that is no agent;
a scripted model past its script says which call it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from deepactors.messages import UserMessage
from deepactors.models import ModelRequest, ScriptedModel
from deepactors.models.testing import ScriptExhausted

APP = textwrap.dedent(
    """
    from deepactors import create_deep_agent
    from deepactors.models import FunctionModel

    agent = create_deep_agent(FunctionModel(lambda request: "hello from my agent"))

    def make():
        return agent

    def tool_like(city: str) -> str:
        return city

    async def amake():
        return agent

    def broken():
        raise RuntimeError("no database")
    """
)


def deepactors(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "deepactors", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env if env is not None else dict(os.environ),
        check=False,
    )


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "myapp.py").write_text(APP)
    return tmp_path


def test_no_arguments_prints_the_help() -> None:
    out = deepactors()
    assert out.returncode == 0
    assert out.stdout.startswith("usage: deepactors")
    assert "run the offline demo" in out.stdout  # the commands, with what each does
    assert out.stderr == ""


def test_run_on_openai_without_a_key_is_refused_before_it_starts() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = deepactors("run", "hello", "--model", "openai:gpt-5.5", env=env)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "openai:gpt-5.5 needs OPENAI_API_KEY" in lines[0]
    assert "deepactors demo" in lines[0]
    assert out.stdout == ""  # no live view, no usage line: nothing started


def test_run_takes_an_agent_as_serve_does(app: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    out = deepactors("run", "hi", "--agent", "myapp:agent", cwd=app, env=env)
    assert out.returncode == 0, out.stderr
    assert "[main] answer: hello from my agent" in out.stdout
    out = deepactors("run", "hi", "--agent", "myapp.py:make", cwd=app, env=env)
    assert out.returncode == 0, out.stderr
    assert "hello from my agent" in out.stdout


def test_run_refuses_model_options_beside_an_agent(app: Path) -> None:
    out = deepactors("run", "hi", "--agent", "myapp:agent", "--model", "openai:x", cwd=app)
    assert out.returncode == 2
    assert "--model with --agent" in out.stderr


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("myapp:tool_like", "needs argument(s) city"),
        ("myapp:amake", "is an async function"),
        ("myapp:broken", "myapp:broken() failed while making the agent: RuntimeError: no database"),
        ("myapp:nothing", "myapp has no 'nothing'"),
    ],
)
@pytest.mark.parametrize("command", ["serve", "run"])
def test_a_target_that_is_no_agent_gets_one_clear_line(
    app: Path, command: str, target: str, says: str
) -> None:
    if command == "serve":
        args = ("serve", target, "--port", "0")
    else:
        args = ("run", "hi", "--agent", target)
    out = deepactors(*args, cwd=app)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    error = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1, out.stderr
    assert says in error[0]


@pytest.mark.anyio
async def test_a_scripted_model_past_its_script_says_which_call_it_was() -> None:
    request = ModelRequest(messages=[UserMessage(content="hi")])
    with pytest.raises(ScriptExhausted, match="called for the 1st time"):
        await ScriptedModel([]).generate(request)
    model = ScriptedModel(["a", "b"])
    await model.generate(request)
    await model.generate(request)
    with pytest.raises(ScriptExhausted, match="called for the 3rd time"):
        await model.generate(request)

"""`deepactors run --model openai:...` as a real process against the local server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.openai.fake_api import FakeOpenAI, answer, call


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deepactors", "run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("loop", "provider"), [("asyncio", "openai"), ("trio", "openai-responses")]
)
def test_run_on_openai_prints_the_trees_usage_and_cost(
    api: FakeOpenAI, loop: str, provider: str
) -> None:
    todos = {"todos": [{"content": "answer", "status": "completed"}]}
    api.reply(
        answer(
            "Planning.", calls=[call("write_todos", todos)], usage={"input": 1000, "output": 100}
        ),
        answer("Forty-two.", usage={"input": 2000, "cached": 1000, "output": 10}),
    )
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": api.base_url}
    out = run_cli("What", "is", "it?", "--model", f"{provider}:gpt-5.5", "--loop", loop, env=env)
    assert out.returncode == 0, out.stderr
    assert "[main] answer: Forty-two." in out.stdout
    # gpt-5.5: $5 input, $0.50 cached, $30 output per million tokens.
    cost = (3000 * 5 + 1000 * 0.5 + 110 * 30) / 1e6
    assert out.stdout.rstrip().endswith(
        "usage: 4,000 input (1,000 cache read, 0 written), 110 output tokens in 2 model calls; "
        f"cost ${cost:.4f}"
    )


def test_an_unknown_provider_is_refused_with_the_known_ones() -> None:
    out = run_cli("hi", "--model", "nosuch:model", env=dict(os.environ))
    assert out.returncode == 2
    assert "unknown model provider 'nosuch'" in out.stderr
    assert "openai" in out.stderr

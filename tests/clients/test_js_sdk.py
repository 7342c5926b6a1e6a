"""The official JS client, ``@langchain/langgraph-sdk`` (the version deep-agents-ui
pins), running deep-agents-ui's flows against ``deepactors serve`` in Node:
follow-ups and Approve / Reject / Edit with the head checkpoint, a fork from an
older one, a dropped stream rejoined with ``Last-Event-ID``, files set by
``updateState`` (``js/sdk_flows.mjs``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).parent / "js"
SDK = JS / "node_modules" / "@langchain" / "langgraph-sdk"


def node_or_skip() -> str:
    """The ``node`` to run the JS clients with; skips, saying why, when they cannot run."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the JS client tests need node and npm")
    if not SDK.is_dir():
        pytest.skip(
            "the JS clients are not installed: `npm ci --prefix tests/clients/js` "
            "(.ci/run does it when npm is there)"
        )
    return node


def test_deep_agents_ui_flows_with_the_js_sdk(url: str) -> None:
    node = node_or_skip()
    done = subprocess.run(
        [node, "sdk_flows.mjs", url], cwd=JS, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    flows = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert len(flows) == 7, done.stdout


def test_crons_with_the_js_sdk(url: str) -> None:
    node = node_or_skip()
    done = subprocess.run(
        [node, "crons.mjs", url], cwd=JS, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert steps == ["ok create", "ok search", "ok fired", "ok delete"], done.stdout

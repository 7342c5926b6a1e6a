"""What ``import deepactors`` pulls in: what a process on asyncio never uses stays out.

Every process that imports the package pays for its imports: a server's
workers, a CLI call, each child process of the test suite. trio is imported
once a trio run meets the loop seam; structlog (which brings in rich and
pygments when installed) once an event is rendered or captured.
"""

from __future__ import annotations

import json
import subprocess
import sys

from deepactors._core.logs import get_logger

_LAZY = ("trio", "structlog", "rich", "pygments", "hypercorn.trio", "jsonschema", "yaml")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_importing_the_package_and_its_server_leaves_trio_and_structlog_out() -> None:
    loaded = _modules_after("import deepactors, deepactors.server, deepactors.persistence")
    assert sorted(loaded & set(_LAZY)) == []


def test_a_run_on_trio_brings_trio_in_and_logs_without_structlog() -> None:
    # The lazy side works: an agent runs on trio from a process that had not
    # imported it, and a warning reaches logging as one line, structlog unloaded.
    code = """
import logging, io
stream = io.StringIO()
logging.basicConfig(stream=stream)
import anyio
from deepactors import create_deep_agent
from deepactors.models import FunctionModel
from deepactors._core.logs import get_logger
agent = create_deep_agent(FunctionModel(lambda request: "hi"))
async def main():
    result = await agent.ainvoke("go")
    assert result["messages"][-1].text == "hi"
anyio.run(main, backend="trio")
get_logger("deepactors.test").warning("odd thing", path="/a b")
import sys
assert "structlog" not in sys.modules, "structlog imported"
assert stream.getvalue() == "WARNING:deepactors.test:odd thing path='/a b'\\n", stream.getvalue()
"""
    assert "trio" in _modules_after(code)


def test_a_captured_event_is_taken_once_structlog_is_loaded() -> None:
    # structlog.testing.capture_logs() sees deepactors' events (and they are
    # then not logged), as it did when the package imported structlog itself.
    import structlog.testing

    with structlog.testing.capture_logs() as logs:
        get_logger("deepactors.test").debug("seen", n=1)
    assert logs == [{"n": 1, "event": "seen", "log_level": "debug"}]

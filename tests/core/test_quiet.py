"""Quiet by default: deepactors logs through ``logging`` and prints nothing unasked.

Each check runs a fresh interpreter, since logging configuration is process-wide
and pytest installs handlers of its own.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from deepactors._core.logs import formatter, get_logger, logging_config
from deepactors.errors import ConfigurationError

# A run that summarizes (and, with debug=True, logs every hook and model call):
# twelve 2,000-character page results against a 2,000-token trigger.
SUMMARIZING_RUN = """
import anyio
from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.events import ContextSummarized
from deepactors.middleware import SummarizationMiddleware
from deepactors.models import FunctionModel


async def fetch(page: int) -> str:
    '''Fetch one page of the archive.

    Args:
        page: The page number.
    '''
    return "x" * 2000


turns = 0


def model(request):
    global turns
    if not request.tools:  # the summarizer's call
        return "SUMMARY: the agent fetched pages."
    turns += 1
    if turns <= 12:
        return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": turns})])
    return "all pages fetched"


agent = create_deep_agent(
    FunctionModel(model),
    tools=[fetch],
    middleware=[SummarizationMiddleware(trigger=("tokens", 2000), keep=("tokens", 600))],
    debug=True,
)


async def main():
    seen = []
    async with agent.astream("fetch the archive") as events:
        async for event in events:
            seen.append(event)
    assert any(isinstance(e, ContextSummarized) for e in seen), "no summary"
    assert events.result["messages"][-1].text == "all pages fetched"


anyio.run(main, backend=BACKEND)
"""


def _python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": ""},
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_summarizing_debug_run_prints_nothing(backend: str) -> None:
    done = _python(f"BACKEND = {backend!r}\n{SUMMARIZING_RUN}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_debug_lines_show_once_logging_asks_for_them(backend: str) -> None:
    setup = "import logging\nlogging.basicConfig(level=logging.DEBUG)\n"
    done = _python(f"{setup}BACKEND = {backend!r}\n{SUMMARIZING_RUN}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    # A plain formatter shows the event and its context as key=value pairs.
    assert any(line.startswith("DEBUG:deepactors:context summarized path=main") for line in lines)
    assert any(line.startswith("DEBUG:deepactors:model call path=main step=") for line in lines)
    assert any(line.startswith("DEBUG:deepactors:hook hook=") for line in lines)


def test_importing_configures_no_logging() -> None:
    done = _python(
        "import logging, deepactors, deepactors.cli, deepactors.server\n"
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
        "assert logging.getLogger('deepactors').handlers == []\n"
        "assert logging.getLogger().level == logging.WARNING\n"
    )
    assert done.returncode == 0, done.stderr


def test_warnings_reach_stderr_without_any_configuration() -> None:
    done = _python(
        "from deepactors._core.logs import get_logger\n"
        "log = get_logger()\n"
        "log.debug('hidden'); log.info('hidden too')\n"
        "log.warning('skill skipped', file='/skills/a.md', reason='no name')\n"
    )
    assert done.stdout == ""
    assert done.stderr == "skill skipped file=/skills/a.md reason='no name'\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_serve_logs_json_lines_on_stderr(loop: str) -> None:
    port = _free_port()
    command = [sys.executable, "-m", "deepactors", "serve", "--loop", loop, "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--log-format", "json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    records = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([server.stderr], [], [], 0.5)
            if not ready:
                continue
            line = server.stderr.readline()
            assert line, "the server exited before saying it was running"
            records.append(json.loads(line))  # every line is one JSON object
            if "running on" in records[-1]["event"].lower():
                break
        else:
            pytest.fail(f"no 'running on' record in 30 s: {records}")
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stderr.close()
    running = records[-1]
    assert running["level"] == "info"
    assert running["logger"].split(".")[0] in ("uvicorn", "hypercorn")
    assert str(port) in running["event"]
    assert {"timestamp", "level", "logger", "event"} <= set(running)


def test_json_records_keep_the_event_fields_and_the_traceback() -> None:
    log = get_logger("deepactors.test_quiet")
    handler = logging.Handler()
    handler.setFormatter(formatter("json"))
    rendered: list[str] = []
    handler.emit = lambda record: rendered.append(handler.format(record))  # type: ignore[method-assign]
    stdlib = logging.getLogger("deepactors.test_quiet")
    stdlib.addHandler(handler)
    stdlib.setLevel(logging.DEBUG)
    try:
        log.debug("context summarized", path="main", dropped=12)
        try:
            raise ValueError("bad value")
        except ValueError:
            log.exception("on_done failed", run_id="r1")
    finally:
        stdlib.removeHandler(handler)
        stdlib.setLevel(logging.NOTSET)
    first, second = (json.loads(line) for line in rendered)
    assert first["event"] == "context summarized"
    assert (first["path"], first["dropped"], first["level"]) == ("main", 12, "debug")
    assert first["logger"] == "deepactors.test_quiet"
    assert (second["event"], second["run_id"], second["level"]) == ("on_done failed", "r1", "error")
    assert "ValueError: bad value" in second["exception"]


def test_a_bad_level_or_format_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="log level"):
        logging_config("verbose", "json")
    with pytest.raises(ConfigurationError, match="log format"):
        logging_config("info", "xml")


def test_the_cli_offers_the_log_options() -> None:
    from deepactors.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["demo"]).log_level == "warning"
    assert parser.parse_args(["run", "hi"]).log_level == "warning"
    serve = parser.parse_args(["serve", "--log-format", "json"])
    assert (serve.log_level, serve.log_format) == ("info", "json")
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--log-format", "xml"])

"""The agent the client tests serve, and ``deepactors serve`` running it.

The agent is a module written into the test's folder and served by a real
``deepactors serve`` process, as a user serves theirs. Its model is a
deterministic function of the conversation:

- a user message with "email" in it: a ``send_email`` call, which stops for a
  human (``interrupt_on``), then ``sent: ...`` or ``not sent: ...``;
- anything else: ``echo #<n>: <text>``, ``n`` the number of user messages the
  model sees, so a run forked from an older checkpoint shows it; with "slow" in
  the text, after a second (a run still going when a page reloads).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.waiting import http_ok, wait_until_serving

__all__ = ["AGENT_MODULE", "served_agent", "serving"]

AGENT_MODULE = '''
import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel
from deepactors.persistence import MemoryCheckpointer


def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient.
        body: What it says.
    """
    return f"sent to {to}: {body}"


async def model(request):
    last = request.messages[-1]
    if "slow" in last.text and not isinstance(last, ToolMessage):
        await anyio.sleep(1)  # a run still going when the page reloads
    users = [m for m in request.messages if m.role == "user"]
    if isinstance(last, ToolMessage):
        verdict = "not sent" if last.status == "error" else "sent"
        return AssistantMessage(content=f"{verdict}: {last.text}")
    if "email" in last.text:
        return AssistantMessage(
            tool_calls=[ToolCall(name="send_email", args={"to": "bob", "body": last.text})]
        )
    return AssistantMessage(content=f"echo #{len(users)}: {last.text}")


agent = create_deep_agent(
    FunctionModel(model),
    tools=[send_email],
    interrupt_on={"send_email": {"allowed_decisions": ["approve", "edit", "reject"]}},
    checkpointer=MemoryCheckpointer(),
)
'''


@contextlib.contextmanager
def served_agent(loop: str, folder: Path, *extra: str) -> Iterator[str]:
    """``deepactors serve app.py``-style: the agent module in ``folder``, served on ``loop``."""
    (folder / "client_app.py").write_text(AGENT_MODULE)
    with serving(["client_app:agent", "--loop", loop, *extra], folder) as url:
        yield url


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(args: list[str], cwd: Path) -> Iterator[str]:
    """``deepactors serve *args`` in ``cwd`` as a process; its URL once it answers.

    (tests/server/serve_process.py does the same for the server tests; the
    client tests are a package of their own.) Stopped with Ctrl-C, and it must
    exit cleanly.
    """
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
    try:
        wait_until_serving(process, lambda: http_ok(f"{url}/ok"), log=log)
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert process.returncode == 0, log.read_text()

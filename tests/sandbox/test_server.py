"""The server with a per-thread sandbox: opened with the app, one workspace per thread and owner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import BubblewrapSandbox, SandboxKey
from deepactors.errors import SandboxError, SandboxUnavailable
from deepactors.models import FunctionModel, ModelRequest
from deepactors.server import create_app
from deepactors.server.auth import api_keys
from tests.server.conftest import Served, serve

__all__ = ["serve"]  # the real-server fixture of tests/server, used here

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"


@pytest.fixture(autouse=True)
def _no_blocking() -> None:
    """The server runs on its own thread's loop here; the detector watches this one."""


def sandbox_agent(sandbox: BubblewrapSandbox) -> Any:
    def model(request: ModelRequest) -> AssistantMessage | str:
        said = request.messages[0].text
        done = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not done:
            command = f"ls -A; cat ../*/note.txt 2>/dev/null; echo {said} > note.txt"
            return AssistantMessage(
                tool_calls=[ToolCall(name="execute", args={"command": command})]
            )
        return f"saw: {done[0].text}"

    return create_deep_agent(FunctionModel(model), backend=sandbox, name="agent")


def test_each_users_thread_works_in_its_own_sandbox(
    serve: Callable[..., Served], sandbox_root: Path
) -> None:
    sandbox = BubblewrapSandbox(sandbox_root)
    app = create_app(sandbox_agent(sandbox), auth=api_keys({ALICE: "alice", BOB: "bob"}))
    served = serve(app)
    answers = {}
    for key, who in ((ALICE, "alice"), (BOB, "bob"), (ALICE, "alice")):
        client = served.client(api_key=key)
        thread = client.threads.create()
        state: Any = client.runs.wait(thread["thread_id"], "agent", input={"messages": who})
        answers[thread["thread_id"]] = state["messages"][-1]["content"]
        workspace = sandbox_root / SandboxKey(thread["thread_id"], who).slug
        assert (workspace / "note.txt").read_text() == f"{who}\n"
    assert len(answers) == 3
    for answer in answers.values():
        # Each run found an empty workspace: no other thread's or user's note.
        assert answer.startswith("saw: ")
        assert "alice" not in answer
        assert "bob" not in answer
    served.stop()
    with pytest.raises(SandboxError, match="closed"):  # closed with the app
        anyio.run(sandbox.check)


@pytest.mark.anyio
async def test_a_sandbox_that_cannot_run_stops_the_server_from_starting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bubblewrap on it
    app = create_app(sandbox_agent(BubblewrapSandbox(tmp_path / "ws")))
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        async with app.router.lifespan_context(app):
            pass
